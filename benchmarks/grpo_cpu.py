"""GRPO on CPU with the embedded 0.5B model as policy and judge: what one step costs, and what it changes.

The packaged Qwen2.5-Coder-0.5B GGUF becomes a transformers folder (``gguf_to_transformers``, the code of
``rubricforge train from-gguf``; reused when ``--policy`` already holds one), then ``train grpo`` runs
``--steps`` + 1 steps on ``--dataset`` with the CPU preset (G=2, one prompt per step), HOTE's Eq. 2 reward
over an evolving bank (``evolve.rubrics=evolving``) judged by the embedded model, and the real tools over
the default corpus index (``rubricforge corpus index`` first). Schedule ``hote`` with one no-tool step:

* step 1 is the **baseline** — no-tool mode (one think, then the answer; no tool schema, no tool turn);
* steps 2 … ``--steps`` + 1 run in tool mode (App. D prompt, search / browse / scholar, at most
  ``--tool-turns`` tool turns).

Memory: the CPU preset puts both rollouts in one forward/backward without activation checkpointing, which
fits a tiny test model; for the 0.5B fp32 policy (2.5 GB weights + gradients + Adam ≈ 10 GB before
activations) its tool-mode step was OOM-killed at 17.7 GB, so this script trains one rollout per micro-batch
(two accumulated: still one group of G=2 per optimiser step) with activation checkpointing.

Per step it prints wall seconds split into generation (TRL's ``_generate``, tool turns included), rewards
(bank update + judge calls + pruning) and the rest (forward, backward, optimiser step); generated tokens
(model tokens only: TRL's tool mask leaves tool results out) per second of generation; peak resident
memory so far; tool calls written and the share that parsed (``parse_trajectory``); the bank's new
positive / negative rubrics and active count; the reward. Then ratio lines of every tool step against the
baseline step, measured in the same process::

    .venv/bin/python benchmarks/grpo_cpu.py --steps 2 --work runs/bench-grpo --json runs/bench-grpo/result.json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from rubricforge.config import Config  # noqa: E402
from rubricforge.llm.local_model import ensure_model  # noqa: E402
from rubricforge.rewards.trajectory import parse_trajectory  # noqa: E402
from rubricforge.training.grpo import build_grpo  # noqa: E402
from rubricforge.training.model import EMBEDDED_POLICY, gguf_to_transformers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
METRICS = {"reward": "reward", "new_pos": "evolve/new_positive", "new_neg": "evolve/new_negative",
           "active": "evolve/active_mean", "update_failed": "evolve/update_failed",
           "r_persistent": "evolve/reward_persistent", "r_active": "evolve/reward_active",
           "gen_len": "completions/mean_length"}


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux


def peak_gpu_gb() -> float | None:
    """Peak GPU memory allocated by torch so far (None without CUDA)."""
    import torch

    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else None


def judge_calls(client: Any) -> float:
    """The judge role's ``generate`` calls so far (cache hits included), from the client's ledger."""
    return client.ledger.summary()["by_role"].get("judge", {}).get("calls", 0) if client is not None else 0


def config(args: argparse.Namespace, work: Path) -> Config:
    judge = {"backend": "local", "model": args.judge_model, "temperature": 0.0, "max_tokens": 384, "concurrency": 1}
    return Config.model_validate({
        "run_dir": str(work / "run"),
        "tools": {"top_k": args.top_k, **({"index_dir": args.index_dir} if args.index_dir else {})},
        "llm": {"cache_path": str(work / "llm-cache.sqlite"), "judge": judge},
        "train": {"preset": "cpu", "reward": "hote", "max_tool_turns": args.tool_turns, "generation": "transformers",
                  "output_dir": str(work / "policy-out"),
                  # one rollout per forward/backward (2 accumulated) and activation checkpointing: with the preset's
                  # batch of 2 and no checkpointing the first tool-mode step was OOM-killed at 17.7 GB resident
                  "grpo_args": {"max_steps": args.steps + 1, "max_completion_length": args.max_completion,
                                "per_device_train_batch_size": 1, "gradient_accumulation_steps": 2,
                                "activation_checkpointing": True, "learning_rate": 1e-6, "seed": args.seed}},
        "evolve": {"rubrics": "evolving", "modes": "hote", "no_tool_steps": 1, "tool_share": 1.0}})


HEADER = (f"{'step':>4} {'mode':>7} {'s/step':>7} {'gen s':>6} {'rew s':>6} {'rest s':>6} {'tokens':>6} {'tok/s':>6} "
          f"{'peakGB':>6} {'gpuGB':>6} {'judge':>5} {'calls':>5} {'parsed':>6} {'+pos':>4} {'+neg':>4} {'active':>6} {'reward':>6} "
          f"{'r_pers':>6} {'r_act':>6}")


def _f(v: Any, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def line(r: dict[str, Any]) -> str:
    rest = r["seconds"] - r.get("generation_s", 0) - r.get("rewards_s", 0)
    share = r["parsed"] / r["tool_calls"] if r.get("tool_calls") else None
    return (f"{r['step']:>4} {r.get('mode', '?'):>7} {r['seconds']:>7.1f} {_f(r.get('generation_s'), '.1f'):>6} "
            f"{_f(r.get('rewards_s'), '.1f'):>6} {rest:>6.1f} {r['tokens']:>6.0f} {_f(r['tok_per_s']):>6} "
            f"{r['peak_rss_gb']:>6.2f} {_f(r.get('peak_gpu_gb')):>6} {r.get('judge_calls', 0):>5.0f} "
            f"{r.get('tool_calls', 0):>5} {_f(share):>6} {_f(r['new_pos'], '.0f'):>4} "
            f"{_f(r['new_neg'], '.0f'):>4} {_f(r['active'], '.1f'):>6} {_f(r['reward'], '.3f'):>6} "
            f"{_f(r['r_persistent'], '.3f'):>6} {_f(r['r_active'], '.3f'):>6}")


def ratios(r: dict[str, Any], base: dict[str, Any]) -> str:
    """Step ``r`` against the baseline step, both measured in this process."""
    tok = r["tok_per_s"] / base["tok_per_s"] if r["tok_per_s"] and base["tok_per_s"] else None
    return (f"step {r['step']} ({r.get('mode')}) vs step {base['step']} ({base.get('mode')}, baseline): "
            f"s/step x{r['seconds'] / base['seconds']:.2f}, generation s x{r['generation_s'] / base['generation_s']:.2f}, "
            f"reward s x{r['rewards_s'] / base['rewards_s']:.2f}, tokens/s x{_f(tok)}")


def instrument(trainer: Any, steps: list[dict[str, Any]], out: Path | None, client: Any = None) -> None:
    """Time generation and rewards of each step, count the tool calls in its completions (and, given the run's
    LLM ``client``, its judge calls), and print the step's row (and rewrite ``out``) as soon as TRL logs it, so a
    run cut short keeps its finished steps. A step's tokens are its generation batch's (one generation per
    optimiser step: ``gradient_accumulation_steps`` x ``per_device_train_batch_size`` = ``generation_batch_size``)."""
    from transformers import TrainerCallback

    current: dict[str, Any] = {}
    generate, rewards = trainer._generate, trainer._calculate_rewards

    def timed_generate(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        result = generate(*a, **kw)
        current["generation_s"] = current.get("generation_s", 0.0) + time.perf_counter() - t
        return result

    def timed_rewards(inputs: Any, prompts: Any, completions: Any, ids: Any) -> Any:
        calls = [c for comp in completions for c in parse_trajectory(comp).tool_calls]
        current.update(mode=inputs[0].get("environment", "tool"), tool_calls=len(calls),
                       parsed=sum(c.valid for c in calls))
        t = time.perf_counter()
        result = rewards(inputs, prompts, completions, ids)
        current["rewards_s"] = current.get("rewards_s", 0.0) + time.perf_counter() - t
        return result

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            current.clear()
            current["t0"], current["judge0"] = time.perf_counter(), judge_calls(client)

        def on_step_end(self, args, state, control, **kw):
            current.update(step=state.global_step, seconds=time.perf_counter() - current.pop("t0"),
                           peak_rss_gb=peak_rss_gb(), peak_gpu_gb=peak_gpu_gb(),
                           judge_calls=judge_calls(client) - current.pop("judge0"))

        def on_log(self, args, state, control, logs=None, **kw):
            if not logs or "reward" not in logs or "seconds" not in current:
                return
            row = {**current, **{k: logs.get(v) for k, v in METRICS.items()}}
            row["tokens"] = (row["gen_len"] or 0) * trainer.args.generation_batch_size
            row["tok_per_s"] = row["tokens"] / row["generation_s"] if row.get("generation_s") else None
            steps.append(row)
            if len(steps) == 1:
                print(HEADER)
            print(line(row), flush=True)
            if len(steps) > 1:
                print(ratios(row, steps[0]), flush=True)
            if out is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(steps, indent=1), encoding="utf-8")

    trainer._generate, trainer._calculate_rewards = timed_generate, timed_rewards
    trainer.add_callback(Clock())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2, help="tool-mode steps after the no-tool baseline step")
    p.add_argument("--work", default="runs/bench-grpo", help="run dir, LLM cache, converted policy")
    p.add_argument("--policy", help="a converted transformers folder (default: <work>/policy-hf, made once)")
    p.add_argument("--dataset", default=str(ROOT / "tests/data/training/examples.jsonl"))
    p.add_argument("--judge-model", default=EMBEDDED_POLICY, help="embedded model for the judge role")
    p.add_argument("--max-completion", type=int, default=128, help="max_completion_length (tool turns included)")
    p.add_argument("--tool-turns", type=int, default=2)
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--index-dir", help="default: the default corpus index")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the per-step rows here (after every step)")
    args = p.parse_args()
    work = Path(args.work)
    cfg = config(args, work)

    t = time.perf_counter()
    policy = gguf_to_transformers(ensure_model(cfg.llm.model_dir, EMBEDDED_POLICY), args.policy or work / "policy-hf")
    print(f"policy {policy} ready in {time.perf_counter() - t:.0f}s; peak RSS {peak_rss_gb():.2f} GB")
    t = time.perf_counter()
    run = build_grpo(cfg, args.dataset, str(policy))
    print(f"trainer built in {time.perf_counter() - t:.0f}s; {run.note}")
    steps: list[dict[str, Any]] = []
    instrument(run.trainer, steps, Path(args.json) if args.json else None, run.client)
    run.train()


if __name__ == "__main__":
    main()
