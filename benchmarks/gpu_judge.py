"""Answer recorded judge requests with an embedded GGUF model on a GPU, for the replay backend.

``race_agreement.py --capture FILE`` records the RACE judge's requests (messages, key); this script answers each
first-attempt request (system + user message) with the GGUF model de-quantized into transformers on load
(``gguf_file=``, as ``train from-gguf`` reads it, without writing a copy), in BF16 on the GPU, greedy (the requests' temperature
0), through the model's chat template, all requests in batches of ``--batch``, and writes a replay file
(``llm.replay_path``) with the same keys, plus ``<out>.judge.json`` (the judge's model and endpoint, which the keys
include) copied beside it. ``race_agreement.py --answers OUT`` then scores the tasks with these answers through
rubricforge's own RACE scorer and parser, on any machine.

What differs from the embedded judge: llama.cpp constrains the embedded judge's answer with a JSON grammar; here
decoding is unconstrained (the prompt states the JSON layout), and an answer that fails validation leaves its
task unscored (``llm.judge.structured_retries=0`` at capture, so no repair round).

    python3 benchmarks/gpu_judge.py --requests prompts.jsonl --gguf models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --out $OUT/answers.jsonl
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=Path, required=True, help="race_agreement.py --capture's file")
    ap.add_argument("--gguf", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-new-tokens", type=int, default=4096, help="the capture's llm.judge.max_tokens")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--limit", type=int, help="answer only the first N requests (a check)")
    ap.add_argument("--device", default="cuda", help="cpu: a check without a GPU")
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    requests = [r for r in map(json.loads, args.requests.read_text(encoding="utf-8").splitlines())
                if len(r["messages"]) == 2][:args.limit]  # first attempts (a repair appends the failed answer)
    tok = AutoTokenizer.from_pretrained(args.gguf.parent, gguf_file=args.gguf.name, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(args.gguf.parent, gguf_file=args.gguf.name, dtype=torch.bfloat16)
    model = model.to(args.device).eval()
    loaded = time.perf_counter() - started
    print(f"{len(requests)} requests; model loaded in {loaded:.0f} s", flush=True)
    prompts = [tok.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=False) for r in requests]
    pad = tok.pad_token_id or tok.eos_token_id
    order = sorted(range(len(requests)), key=lambda i: len(prompts[i]))  # similar lengths batch together
    args.out.unlink(missing_ok=True)
    for start in range(0, len(order), args.batch):
        chunk = order[start:start + args.batch]
        t = time.perf_counter()
        batch = tok([prompts[i] for i in chunk], return_tensors="pt", padding=True).to(args.device)
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=args.max_new_tokens, do_sample=False,
                                 pad_token_id=pad)
        width = batch["input_ids"].shape[1]
        with args.out.open("a", encoding="utf-8") as fh:
            for row, i in enumerate(chunk):
                new = out[row, width:]
                done = int((new != pad).sum())
                text = tok.decode(new, skip_special_tokens=True)
                usage = {"prompt_tokens": int(batch["attention_mask"][row].sum()), "completion_tokens": done}
                fh.write(json.dumps({**requests[i], "text": text, "usage": usage}, ensure_ascii=False) + "\n")
        tokens = int((out[:, width:] != pad).sum())
        print(f"batch of {len(chunk)}: {time.perf_counter() - t:.0f} s, {tokens} tokens generated, longest answer "
              f"{out.shape[1] - width} tokens; peak GPU memory "
              f"{torch.cuda.max_memory_allocated() / 1e9 if args.device == 'cuda' else 0:.1f} GB",
              flush=True)
    shutil.copy(args.requests.with_suffix(".judge.json"), args.out.with_suffix(".judge.json"))
    print(f"{len(requests)} answers -> {args.out} in {time.perf_counter() - started:.0f} s "
          f"({torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'})")


if __name__ == "__main__":
    main()
