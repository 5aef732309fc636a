"""What llama.cpp's weight repacking costs or gives: generated tokens/s of an embedded model loaded with and
without its extra (repacked) weight buffers (``llm.<role>.repack``), same prompt, same run.

Each setting runs in its own child process, so a setting that crashes llama.cpp on this CPU (repacking on an
AMX CPU: llama.cpp issue 20824) is reported as that crash and the other still measured::

    .venv/bin/python benchmarks/llama_repack.py [--model qwen2.5-coder-1.5b-instruct-q4] [--tokens 128]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

PROMPT = [{"role": "user", "content": "Write a short paragraph about the history of the printing press."}]


def child(path: str, repack: bool, tokens: int, threads: int | None) -> None:
    from rubricforge.llm.local_model import load_llama

    llama = load_llama(path, 2048, threads, repack)
    rates = []
    for _ in range(2):  # the first run warms the caches; the better of two is reported
        llama.reset()
        t0 = time.perf_counter()
        out = llama.create_chat_completion(messages=PROMPT, max_tokens=tokens, temperature=0.0)
        rates.append(out["usage"]["completion_tokens"] / (time.perf_counter() - t0))
    print(json.dumps({"tokens_per_s": max(rates)}))


def main() -> None:
    from rubricforge.config import LLMConfig
    from rubricforge.llm.local_model import DEFAULT_MODEL, cpu_flags, ensure_model
    from rubricforge.llm.native_probe import cpu_summary, crash_message

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    path = str(ensure_model(LLMConfig().model_dir, args.model))
    print(f"{args.model} on {cpu_summary()}, {args.threads or os.cpu_count()} threads, {args.tokens} tokens")
    results: dict[str, float | None] = {}
    for repack in (False, True):
        done = subprocess.run([sys.executable, __file__, "--child", path, str(int(repack)), str(args.tokens),
                               str(args.threads or 0)], capture_output=True, text=True)
        name = "repack on " if repack else "repack off"
        if done.returncode == 0:
            results[name] = json.loads(done.stdout.splitlines()[-1])["tokens_per_s"]
            print(f"{name}: {results[name]:.2f} tokens/s")
        else:
            results[name] = None
            print(f"{name}: {crash_message(os.path.basename(path), done.returncode, True, repack, done.stderr)[0]}")
    on, off = results["repack on "], results["repack off"]
    if on and off:
        print(f"repack off / on: {off / on:.2f}x tokens/s")
    print(f"auto on this CPU: repack {'off' if cpu_flags() & {'amx_tile', 'amx_int8', 'amx_bf16'} else 'on'}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        path, repack, tokens, threads = sys.argv[2:6]
        child(path, repack == "1", int(tokens), int(threads) or None)
    else:
        main()
