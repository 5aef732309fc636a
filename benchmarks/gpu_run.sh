#!/usr/bin/env bash
# The GPU benchmarks of issue 27 on a lent machine that reaches no package index, from the carry folders that
# benchmarks/gpu_pack.sh made (.carry/c01 with the wheels, .carry/cNN with slices of the payload).
#   bash benchmarks/gpu_run.sh parts       keep this call's carried slice in /tmp/rf (the machine stays warm 30 s)
#   bash benchmarks/gpu_run.sh retrieval   + install the wheels, run gpu_retrieval.py (5 M x 384, fp16 and fp32)
#   bash benchmarks/gpu_run.sh grpo        + check every slice arrived, unpack, run gpu_grpo.py (0.5B, small-gpu)
#   bash benchmarks/gpu_run.sh curve       + check the slices, unpack, run grpo_learning_curve.py (0.5B, small-gpu):
#                                          the trained arm and the learning-rate-0 control side by side on the GPU
#   bash benchmarks/gpu_run.sh judge       + check the slices, unpack, answer the captured judge requests with the
#                                          1.5B on the GPU (gpu_judge.py; `gpu_pack.sh judge PROMPTS` made the slices)
#   bash benchmarks/gpu_run.sh all         retrieval, then grpo, in one call
# RF_BUDGET_S (default 540) bounds the whole script: each stage gets a timeout and the GRPO run stops at a step
# end with time left to write its JSON. Results go to $OUT (the device tool brings back at most 8 files).
# RF_RETRIEVAL_ARGS / RF_GRPO_ARGS are appended to the benchmarks' arguments (a toy-scale check on a CPU:
# "--n 20000 --device cpu" / "--preset cpu --steps 2 --policy <tiny model> ..."); RF_CURVE_ARGS replaces the
# curve's settings (default below); PY is the Python (python3).
set -uo pipefail
STAGE=${1:-all}
RF=${RF_DIR:-/tmp/rf}
PY=${PY:-python3}
RESULTS=${OUT:-$RF/out}
BUDGET=${RF_BUDGET_S:-540}
START=$(date +%s)
mkdir -p "$RF/parts" "$RF/wheels" "$RESULTS"
left() { echo $((BUDGET - ($(date +%s) - START))); }
log() { echo "[gpu_run +$(($(date +%s) - START))s] $*"; }

for d in .carry/c[0-9]*; do  # what this call carried (cp -n: a repeated call changes nothing)
  [ -f "$d/part" ] && cp -n "$d/part" "$RF/parts/${d##*/}"
  [ -f "$d/SHA256SUMS" ] && cp "$d/SHA256SUMS" "$RF/"
  [ -d "$d/wheels" ] && cp -n "$d"/wheels/*.whl "$RF/wheels/"
done
log "slices held: $(ls "$RF/parts" | tr '\n' ' ')"
[ "$STAGE" = parts ] && exit 0
if [ "$STAGE" = grpo ] || [ "$STAGE" = curve ] || [ "$STAGE" = judge ] || [ "$STAGE" = all ]; then  # fail fast, before anything is installed or run
  [ -f "$RF/SHA256SUMS" ] || { log "no SHA256SUMS: carry the slices first"; exit 4; }
  missing=$(cd "$RF/parts" && awk '{print $2}' ../SHA256SUMS | while read -r p; do [ -f "$p" ] || echo "$p"; done | tr '\n' ' ')
  [ -z "$missing" ] || { log "slices missing here: $missing (a fresh machine starts bare: carry them again)"; exit 4; }
  (cd "$RF/parts" && sha256sum -c --quiet ../SHA256SUMS) || { log "a slice is corrupt"; exit 4; }
fi

if [ ! -f "$RF/site/.installed" ]; then
  ls "$RF"/wheels/*.whl >/dev/null 2>&1 || { log "no wheels: the first call must carry .carry/c01"; exit 3; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$RF/site" \
    "$RF"/wheels/*.whl || exit 3
  touch "$RF/site/.installed"
fi
export PYTHONPATH="$RF/site:$PWD" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false TQDM_DISABLE=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv; nproc; free -g | head -2
  "$PY" -c "import torch, transformers, trl, datasets, pyarrow, faiss, sentence_transformers, llama_cpp
print('python', __import__('sys').version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__,
      'trl', trl.__version__, 'datasets', datasets.__version__, 'pyarrow', pyarrow.__version__, 'faiss', faiss.__version__,
      'sentence-transformers', sentence_transformers.__version__, 'llama_cpp', llama_cpp.__version__)"
} 2>&1 | tee -a "$RESULTS/env.txt"

if [ "$STAGE" = retrieval ] || [ "$STAGE" = all ]; then
  log "retrieval: 5 M x 384 random unit vectors, torch on the GPU vs faiss-cpu on $(nproc) cores"
  timeout $(( $(left) < 240 ? $(left) : 240 )) "$PY" benchmarks/gpu_retrieval.py --out "$RESULTS/gpu_retrieval.json" \
    ${RF_RETRIEVAL_ARGS:-} 2>&1 | tee "$RESULTS/gpu_retrieval.log"
  log "retrieval done (exit ${PIPESTATUS[0]})"
fi

if [ "$STAGE" != retrieval ] && [ ! -d "$RF/payload" ]; then
  cat $(awk -v d="$RF/parts/" '{print d $2}' "$RF/SHA256SUMS") | tar -xzf - -C "$RF" || exit 4
fi

if [ "$STAGE" = judge ]; then
  timeout $(( $(left) - 10 )) "$PY" benchmarks/gpu_judge.py --requests "$RF/payload/prompts.jsonl" \
    --gguf "$RF/payload/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" --out "$RESULTS/answers.jsonl" \
    ${RF_JUDGE_ARGS:-} 2>&1 | grep -v "Loading weights" | tee "$RESULTS/gpu_judge.log"
fi

if [ "$STAGE" = curve ]; then
  CURVE=(--preset small-gpu --model-dir "$RF/payload/models" --work "$RF/curve" ${RF_CURVE_ARGS:---steps 40 --lr 1e-5 \
         --prompts 2 --group 8 --max-completion 48 --bf16 --seed 0})
  "$PY" -c "import sys; from rubricforge.llm.local_model import ensure_model; from rubricforge.training.model import \
EMBEDDED_POLICY, gguf_to_transformers as convert; convert(ensure_model(sys.argv[1], EMBEDDED_POLICY), sys.argv[2])" \
    "$RF/payload/models" "$RF/curve/policy-hf" > "$RESULTS/curve-convert.log" 2>&1  # once, before both arms read it
  log "policy converted; both arms with $(left) s left"
  for arm in trained control; do
    timeout $(( $(left) - 20 )) "$PY" benchmarks/grpo_learning_curve.py "${CURVE[@]}" --arm $arm > "$RESULTS/curve-$arm.log" 2>&1 &
  done
  wait
  cp "$RF"/curve/curve-lr*.json "$RESULTS/"  # a run cut by the timeout still has its steps: plot them here
  log "curve done: $(ls "$RESULTS")"
  tail -n 5 "$RESULTS"/curve-*.log
fi

if [ "$STAGE" = grpo ] || [ "$STAGE" = all ]; then
  log "payload: $(du -sh "$RF/payload" | cut -f1); GRPO with $(left) s left"
  # the run stops at a step end 75 s before the budget ends (a step, saving the policy, the JSON)
  timeout $(( $(left) - 10 )) "$PY" benchmarks/gpu_grpo.py --budget-s $(( $(left) - 75 )) --work "$RF/grpo" \
    --model-dir "$RF/payload/models" --embedding-model "$RF/payload/minilm-fp16" --policy "$RF/policy-hf" \
    --json "$RESULTS/gpu_grpo.json" ${RF_GRPO_ARGS:-} > "$RESULTS/gpu_grpo.log" 2>&1
  log "grpo done (exit $?)"
  tail -n 45 "$RESULTS/gpu_grpo.log"
fi
