"""GRPO on a GPU (``train grpo``'s trainer, ``build_grpo``): the embedded Qwen2.5-Coder-0.5B as policy, the
composite reward (DeepRubric Eq. 5) judged by the same GGUF through llama.cpp on the machine's CPU cores (the
``local`` backend), tool rollouts over the default corpus index — what a step costs and where it goes.

The policy is the packaged GGUF de-quantized into a transformers folder (``gguf_to_transformers``, the code of
``train from-gguf``; reused when ``--policy`` already holds one). The index is built first when missing
(``build_index``: the embedding model on the GPU; ``--embedding-model`` points at a copy, e.g. MiniLM saved in
fp16 to travel). The preset (``small-gpu`` by default: G = 4, 2 prompts per step, BF16, activation
checkpointing) runs as is except: one generation per optimiser step (``gradient_accumulation_steps`` =
generation batch / micro-batch, so every step generates, judges and updates), ``--max-completion`` tokens,
``--tool-turns``, ``--steps``, and a wall-clock ``--budget-s`` (from the script's start) after which training stops
at the next step end. The GGUF's de-quantization runs on a thread while the index builds.

Per step (``grpo_cpu.instrument``): seconds split into generation (tool turns included), rewards (judge calls
included) and the rest (forward, backward, optimiser), generated tokens/s, peak GPU memory, judge calls,
tool calls, reward. ``--json`` gets the summary (shares of the step, means, reward first vs last steps) and
``<json stem>.steps.json`` the rows, rewritten after every step::

    python3 benchmarks/gpu_grpo.py --model-dir /tmp/rf/models --embedding-model /tmp/rf/minilm-fp16 \\
        --policy /tmp/rf/policy-hf --work /tmp/rf/grpo --json $OUT/gpu_grpo.json          # on the GPU
    .venv/bin/python benchmarks/gpu_grpo.py --preset cpu --policy runs/tiny --steps 2 --corpus-limit 300 \\
        --index-dir runs/tiny-index --work runs/gpu-grpo-toy --json runs/gpu-grpo-toy/result.json  # CPU check
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "benchmarks"))

from grpo_cpu import instrument, peak_rss_gb  # noqa: E402

from rubricforge.config import Config  # noqa: E402
from rubricforge.corpora.indexing import build_index, index_ready  # noqa: E402
from rubricforge.llm.local_model import ensure_model  # noqa: E402
from rubricforge.training.grpo import build_grpo  # noqa: E402
from rubricforge.training.model import EMBEDDED_POLICY, gguf_to_transformers  # noqa: E402
from rubricforge.training.presets import preset_args  # noqa: E402


def config(args: argparse.Namespace, work: Path) -> Config:
    preset = preset_args(args.preset)
    judge = {"backend": "local", "model": EMBEDDED_POLICY, "temperature": 0.0, "max_tokens": 384, "concurrency": 1}
    return Config.model_validate({
        "run_dir": str(work / "run"),
        "corpus": {"limit": args.corpus_limit} if args.corpus_limit else {},
        "embedding": {"model": args.embedding_model},
        "tools": {"top_k": args.top_k, "snippet_chars": args.snippet_chars,
                  "browse_chars": args.browse_chars, **({"index_dir": args.index_dir} if args.index_dir else {})},
        "llm": {"cache_path": str(work / "llm-cache.sqlite"), "judge": judge,
                **({"model_dir": args.model_dir} if args.model_dir else {})},
        "reward": {"judge_mode": args.judge_mode},
        "train": {"preset": args.preset, "reward": "composite", "max_tool_turns": args.tool_turns,
                  "generation": "transformers", "output_dir": str(work / "policy-out"),
                  "grpo_args": {"max_steps": args.steps, "max_completion_length": args.max_completion,
                                "gradient_accumulation_steps": (preset["generation_batch_size"]
                                                                // preset["per_device_train_batch_size"]),
                                "save_strategy": "no", "report_to": "none", "seed": args.seed}}})


def summary(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the logged steps: the shares of a step, means, and the reward of the first vs the last third."""
    if not steps:
        return {}
    total = sum(r["seconds"] for r in steps)
    gen = sum(r.get("generation_s", 0.0) for r in steps)
    rew = sum(r.get("rewards_s", 0.0) for r in steps)
    rewards = [r["reward"] for r in steps if r.get("reward") is not None]
    third = max(1, len(rewards) // 3)
    gpu = [r["peak_gpu_gb"] for r in steps if r.get("peak_gpu_gb") is not None]
    return {"steps": len(steps), "s_per_step": round(total / len(steps), 2),
            "s_per_step_after_first": round(statistics.fmean(r["seconds"] for r in steps[1:]), 2) if len(steps) > 1 else None,
            "generated_tokens_per_s": round(sum(r["tokens"] for r in steps) / gen, 1) if gen else None,
            "share_generation": round(gen / total, 3), "share_rewards": round(rew / total, 3),
            "share_update_and_rest": round(1 - (gen + rew) / total, 3),
            "judge_calls_per_step": round(statistics.fmean(r.get("judge_calls", 0) for r in steps), 2),
            "tool_calls_per_step": round(statistics.fmean(r.get("tool_calls", 0) for r in steps), 2),
            "peak_gpu_gb": max(gpu) if gpu else None, "peak_rss_gb": round(max(r["peak_rss_gb"] for r in steps), 2),
            "reward_first_third": round(statistics.fmean(rewards[:third]), 4) if rewards else None,
            "reward_last_third": round(statistics.fmean(rewards[-third:]), 4) if rewards else None}


def main() -> None:
    import torch
    from transformers import TrainerCallback

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small-gpu", help="small-gpu (default) | paper | cpu (a toy-scale check)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--budget-s", type=float, default=None,
                   help="stop training at the first step end this many seconds after the script started")
    p.add_argument("--work", default="runs/gpu-grpo", help="run dir, LLM cache, converted policy, trained policy")
    p.add_argument("--policy", help="a transformers folder (default: <work>/policy-hf, converted from the GGUF once)")
    p.add_argument("--model-dir", help="llm.model_dir: where the judge's GGUF is (assembled from the packages if not)")
    p.add_argument("--embedding-model", default="default", help="embedding.model (a folder, e.g. MiniLM in fp16)")
    p.add_argument("--index-dir", help="tools.index_dir (default: the default corpus index, built when missing)")
    p.add_argument("--corpus-limit", type=int, help="corpus.limit when the index is built (a toy-scale check)")
    p.add_argument("--dataset", default=str(ROOT / "tests/data/training/examples.jsonl"))
    p.add_argument("--judge-mode", default="batched", choices=["batched", "per_criterion"])
    # tool results count towards max_completion_length: short snippets leave room to close <answer> (a rollout
    # without one scores 0 and costs no judge call, as every rollout of benchmarks/grpo_cpu.py at 128 tokens did)
    p.add_argument("--max-completion", type=int, default=384, help="max_completion_length (tool turns included)")
    p.add_argument("--tool-turns", type=int, default=2)
    p.add_argument("--top-k", type=int, default=2, help="tools.top_k: results per search")
    p.add_argument("--snippet-chars", type=int, default=300, help="tools.snippet_chars: characters per result")
    p.add_argument("--browse-chars", type=int, default=1200, help="tools.browse_chars: characters a browse returns")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", required=True, help="the summary; the rows go to <stem>.steps.json after every step")
    args = p.parse_args()
    start = time.perf_counter()
    work, out = Path(args.work), Path(args.json)
    cfg = config(args, work)
    result: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__,
        "preset": args.preset, "reward": "composite", "judge_mode": args.judge_mode,
        "judge": f"{EMBEDDED_POLICY} (GGUF) through llama.cpp on the CPU cores (local backend, one call at a time)",
        "max_completion_length": args.max_completion, "max_tool_turns": args.tool_turns, "top_k": args.top_k,
        "snippet_chars": args.snippet_chars, "browse_chars": args.browse_chars, "dataset": args.dataset}

    # the GGUF's de-quantization (CPU) overlaps the index build (the embedding model on the GPU)
    with ThreadPoolExecutor(1) as pool:
        t = time.perf_counter()
        converting = pool.submit(gguf_to_transformers, ensure_model(cfg.llm.model_dir, EMBEDDED_POLICY),
                                 args.policy or work / "policy-hf")
        if not index_ready(cfg):
            build_index(cfg, progress=False)
        result["index"], result["index_ready_s"] = str(cfg.index_dir()), round(time.perf_counter() - t, 1)
        policy = converting.result()
        result["policy"], result["policy_ready_s"] = str(policy), round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    run = build_grpo(cfg, args.dataset, str(policy))
    result["trainer_built_s"] = round(time.perf_counter() - t, 1)
    print(f"policy {policy} ({result['policy_ready_s']} s); index {result['index']} ({result['index_ready_s']} s); "
          f"trainer built in {result['trainer_built_s']} s; peak RSS {peak_rss_gb():.2f} GB; {run.note}", flush=True)

    steps: list[dict[str, Any]] = []
    instrument(run.trainer, steps, out.with_name(out.stem + ".steps.json"), run.client)

    class Budget(TrainerCallback):
        def on_step_end(self, targs, state, control, **kw):
            if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                control.should_training_stop = True

    run.trainer.add_callback(Budget())
    t = time.perf_counter()
    run.train()
    result["train_s"] = round(time.perf_counter() - t, 1)
    result["stopped_by_budget"] = len(steps) < args.steps
    result["summary"] = summary(steps)
    print(json.dumps(result["summary"]), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**result, "steps": steps}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
