"""Judge calls and seconds per step of the self-play loops — HOTE's (`train hote`) and SCORE's (`train score`) — on
CPU with tiny local Qwen2 policies (tests/support/tiny_qwen.py) whose tokens are scripted
(tests/support/training_fakes.ScriptedPolicy), judged by the embedded llama.cpp model or, for HOTE, a scripted
judge with no latency (rubricforge.testing.FakeOpenAI, the whole-loop test's)::

    .venv/bin/python benchmarks/selfplay_steps.py --loops hote --batches 4,8 --group 2 --steps 2 \\
        --judge qwen2.5-coder-0.5b-instruct-q4 --max-tokens 256
    .venv/bin/python benchmarks/selfplay_steps.py --loops score --batches 2,4 --group 2 --steps 2 \\
        --judge qwen2.5-coder-0.5b-instruct-q4 --max-tokens 384
    .venv/bin/python benchmarks/selfplay_steps.py --loops hote --batches 8 --group 4 --steps 4  # scripted judge

With ``--judge <embedded model>`` every LLM role (generator, verifier, judge) runs that packaged model in this
process (temperature 0, ``--max-tokens`` per answer, one call at a time), and every scripted answer carries its
own rollout number, since a real policy's answers differ: the LLM cache then answers only the prompts that
really repeat. HOTE: the scripted loop of the ``train hote`` test (no-tool mode; "good" and "short" answers,
"first" / "second" proposed tasks), B tasks, G rollouts, G' proposals. SCORE: B questions about
*2001: A Space Odyssey*, K rollouts, each a search over ``--index-dir`` (default: the default corpus index) and an
answer that cites the first snippet (first rollout) or nothing; a valid rubric selection; the assessor searches at
most ``--search-turns`` turns; the harness is rewritten every ``--harness-every`` steps.

Per step: the wall time and its shares — generation (the policies' rollouts, tool calls included, and the
proposer's / evaluator's generation), judging (the reward functions: rubric-bank updates, rubric verdicts,
assessments; HOTE's meta rubrics; SCORE's harness), checkpoint (HOTE's per-step TRL saves; SCORE's fall after TRL's
step ends, outside the measured step) and the update (the rest:
log-probabilities, loss, backward, optimiser; HOTE's proposer update and state) — and the LLM calls by stage: how
many were asked, reached the model, were answered by the cache, re-asked after a failed validation, and failed
validation for good. HOTE adds its own phases (solver step, proposer update, proposing, saving). The last line per
loop and batch size gives the medians over steps 2.. (step 1 loads the index, the embedder and the judge).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "tests"))  # the tiny model, the fake judge and the scripted policies

FILM = ["Who directed the 1968 film 2001: A Space Odyssey?", "When was 2001: A Space Odyssey released?",
        "Who co-wrote the screenplay of 2001: A Space Odyssey?", "How was 2001: A Space Odyssey received by critics?",
        "What is the HAL 9000 computer in 2001: A Space Odyssey?", "Where was 2001: A Space Odyssey filmed?",
        "What music is used in 2001: A Space Odyssey?", "Which novel accompanies 2001: A Space Odyssey?"]
SELECTION = ('<dimensions><dim name="factuality"/><dim name="coherence" weight="0.3"/>'
             '<dim name="insight" weight="0.2"/><dim name="fairness" weight="0.1"/></dimensions>')
SHARES = ("generation", "judging", "checkpoint", "update")


class Clock:
    """Wall seconds spent inside wrapped methods, per bucket; a call nested in one of the same bucket (TRL's
    ``_generate`` calls ``_generate_single_turn``) is counted once."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self._depth: Counter[str] = Counter()
        self._lock = threading.Lock()

    def wrap(self, obj: Any, name: str, bucket: str) -> None:
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._depth[bucket] += 1
                outer = self._depth[bucket] == 1
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                with self._lock:
                    self._depth[bucket] -= 1
                    if outer:
                        self.seconds[bucket] += time.perf_counter() - started

        setattr(obj, name, timed)

    def take(self) -> dict[str, float]:
        """The seconds since the last ``take``."""
        with self._lock:
            out, self.seconds = self.seconds, defaultdict(float)
        return out


class Calls:
    """The LLM client's ledger per stage, as differences between snapshots."""

    KEYS = ("calls", "requests", "cache_hits", "failures")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.last = self._now()

    def _now(self) -> dict[str, Counter[str]]:
        stages = self.client.ledger.summary()["by_stage"]
        return {s: Counter({k: int(v[k]) for k in self.KEYS}) for s, v in stages.items()}

    def take(self) -> dict[str, Counter[str]]:
        now = self._now()
        out = {s: c - self.last.get(s, Counter()) for s, c in now.items()}
        self.last = now
        return {s: c for s, c in out.items() if c["calls"]}


def calls_line(stages: dict[str, Counter[str]]) -> str:
    """``stage asked/model/cache/re-asked/failed`` per stage: re-asked = requests beyond one per call that reached
    the model (a validation error re-prompts), failed = calls that ended unvalidated."""
    parts = []
    for stage, c in sorted(stages.items()):
        model = c["calls"] - c["cache_hits"]
        parts.append(f"{stage} {c['calls']}/{model}/{c['cache_hits']}/{c['requests'] - model}/{c['failures']}")
    return f"LLM calls {sum(c['calls'] for c in stages.values())} (asked/model/cache/re-asked/failed: {', '.join(parts)})"


def step_line(label: str, seconds: float, spent: dict[str, float], stages: dict[str, Counter[str]], extra: str = "") -> dict[str, Any]:
    row = {"seconds": seconds, **{k: spent.get(k, 0.0) for k in SHARES[:3]}}
    row["update"] = seconds - sum(row[k] for k in SHARES[:3])
    row["calls"] = sum(c["calls"] for c in stages.values())
    row["model"] = sum(c["calls"] - c["cache_hits"] for c in stages.values())
    shares = ", ".join(f"{k} {row[k]:.1f} s ({row[k] / seconds:.0%})" for k in SHARES)
    print(f"{label}: {seconds:.1f} s = {shares}; {calls_line(stages)}{extra}", flush=True)
    return row


def summary(loop: str, batch: int, rows: list[dict[str, Any]]) -> None:
    later = rows[1:] or rows
    med = {k: statistics.median(r[k] for r in later) for k in ("seconds", *SHARES, "calls", "model")}
    total = sum(med[k] for k in SHARES) or 1.0
    print(f"== {loop} B={batch}: median over steps 2..{len(rows)}: {med['seconds']:.1f} s/step, "
          f"{med['calls']:.0f} LLM calls/step ({med['model']:.0f} reached the model); shares "
          + ", ".join(f"{k} {med[k] / total:.0%}" for k in SHARES), flush=True)


def distinct(turn: Callable[[str, int], str]) -> Callable[[str, int], str]:
    """``turn`` with a running number in each answer (a real policy's answers differ; the scripted ones repeat)."""
    n = itertools.count(1)
    return lambda context, row: turn(context, row).replace("</answer>", f" (rollout {next(n)})</answer>")


def embedded_llm(model: str, max_tokens: int, cache_path: Path) -> dict[str, Any]:
    role = {"backend": "local", "model": model, "temperature": 0.0, "max_tokens": max_tokens, "concurrency": 1}
    return {"generator": role, "verifier": role, "judge": role, "cache_path": str(cache_path)}


def run_hote(a: argparse.Namespace, batch: int, tmp: Path, model: Path) -> list[dict[str, Any]]:
    import support.hote_loop as loop

    from rubricforge.config import Config
    from rubricforge.testing import FakeOpenAI

    topics = ["oceans", "the crust", "the sky", "bees"]
    loop.QUERIES = [f"How does process number {i} of {topics[i % 4]} work?" for i in range(2 * batch)]
    dataset = loop.data(tmp)
    rows: list[dict[str, Any]] = []
    with FakeOpenAI(stages=loop.JUDGE, keep_requests=False) as server:
        cfg = loop.hote_cfg(tmp, server, a.steps).model_dump(mode="json")
        n = batch // (2 * a.proposer_group)
        cfg["hote"].update(batch_size=batch, group=a.group, proposer_group=a.proposer_group,
                           proposer_grpo_args={"per_device_train_batch_size": n * a.proposer_group})
        cfg["train"]["grpo_args"]["per_device_train_batch_size"] = batch * a.group
        if a.judge != "scripted":
            cfg["llm"] = embedded_llm(a.judge, a.max_tokens, tmp / "llm-cache.sqlite")
        policy = loop.turn if a.judge == "scripted" else distinct(loop.turn)
        run = loop.start(Config.model_validate(cfg), dataset, model, policy)
        clock, calls = Clock(), Calls(run.client)
        for trainer in (run.solver, run.proposer):
            clock.wrap(trainer, "_generate", "generation")
            clock.wrap(trainer, "_save_checkpoint", "checkpoint")
        clock.wrap(run.solver, "_calculate_rewards", "judging")  # the proposer's waits for the next step: not timed
        clock.wrap(run, "_on_loop", "judging")  # the meta rubrics

        def on_step(r: Any) -> None:
            phases = ", ".join(f"{k} {v:.1f}" for k, v in r.phases.items())
            rows.append(step_line(f"hote B={batch} step {r.step}", r.seconds, clock.take(), calls.take(),
                                  f"; HOTE phases {phases}; {len(r.invalid)} invalid proposals"))

        clock.take()
        calls.take()
        run.train(on_step=on_step)
        if a.judge == "scripted":
            print(f"{server.n_requests} requests reached the scripted judge", flush=True)
    return rows


def run_score(a: argparse.Namespace, batch: int, tmp: Path, model: Path) -> list[dict[str, Any]]:
    import support.hote_loop as data_rows
    from support.training_fakes import ScriptedPolicy, scripted_turn
    from transformers import TrainerCallback

    from rubricforge.config import Config
    from rubricforge.training.score import build_score

    data_rows.QUERIES = FILM[:max(batch, 2)]
    dataset = data_rows.data(tmp)
    writer = distinct(scripted_turn)
    cfg = Config.model_validate({
        "run_dir": str(tmp / "run"), "llm": embedded_llm(a.judge, a.max_tokens, tmp / "llm-cache.sqlite"),
        "tools": {"top_k": 2, "snippet_chars": 200, **({"index_dir": a.index_dir} if a.index_dir else {})},
        "score": {"harness_every": a.harness_every, "max_search_turns": a.search_turns,
                  "assessor": "role"},  # the judge assesses: its calls are what this measures
        "train": {"preset": "cpu", "output_dir": str(tmp / "out"),
                  "grpo_args": {"max_completion_length": 1024, "learning_rate": 1e-3, "seed": 0, "max_steps": a.steps,
                                "num_generations": a.group, "generation_batch_size": batch * a.group,
                                "per_device_train_batch_size": batch * a.group, "gradient_accumulation_steps": 1,
                                "save_strategy": "steps", "save_steps": 1}}})
    run = build_score(cfg, dataset, str(model))
    trainer = run.trainer
    ScriptedPolicy(trainer.model, trainer.processing_class,
                   lambda context, row: SELECTION if "Dimension pool:" in context else writer(context, row))
    clock, calls = Clock(), Calls(run.client)
    for name, bucket in (("_generate", "generation"), ("_generate_single_turn", "generation"),
                         ("_calculate_rewards", "judging")):  # TRL saves after on_step_end: outside the step
        clock.wrap(trainer, name, bucket)
    clock.wrap(run.hooks, "finish", "judging")  # consistency and, every M steps, the harness
    rows: list[dict[str, Any]] = []
    started: list[float] = []

    class Step(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            clock.take()
            calls.take()
            started[:] = [time.perf_counter()]

        def on_step_end(self, args, state, control, **kw):
            rec = run.hooks.history[-1]
            rows.append(step_line(f"score B={batch} step {state.global_step}", time.perf_counter() - started[0],
                                  clock.take(), calls.take(),
                                  f"; invalid selections {len(rec['invalid'])}, R_eval {rec['r_eval']}, reward mean "
                                  f"{rec['reward_mean']}, evaluator searches {rec['search_calls']}"))

    trainer.add_callback(Step())
    run.train()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="hote", help="comma-separated: hote, score")
    parser.add_argument("--batches", default="8", help="comma-separated B (tasks / queries per step)")
    parser.add_argument("--group", type=int, default=4, help="G (HOTE) / K (SCORE) rollouts per task")
    parser.add_argument("--proposer-group", type=int, default=2, help="HOTE's G' proposals per combination")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--judge", default="scripted",
                        help="scripted (HOTE only, no latency) or a packaged embedded model, e.g. "
                             "qwen2.5-coder-0.5b-instruct-q4, for every LLM role")
    parser.add_argument("--max-tokens", type=int, default=256, help="embedded judge: tokens per answer")
    parser.add_argument("--index-dir", help="SCORE's search index (default: the default corpus index)")
    parser.add_argument("--search-turns", type=int, default=3, help="SCORE: the assessor's turns (score.max_search_turns)")
    parser.add_argument("--work", help="keep each run (LLM cache with the judge's answers, run directory) under "
                                           "<work>/<loop>-B<batch>; it must not hold an earlier run (default: a temporary folder)")
    parser.add_argument("--harness-every", type=int, default=2, help="SCORE: M (score.harness_every)")
    a = parser.parse_args()
    loops = a.loops.split(",")
    if "score" in loops and a.judge == "scripted":
        parser.error("SCORE runs with an embedded judge only: pass --judge qwen2.5-coder-0.5b-instruct-q4")

    from support.tiny_qwen import build_tiny_qwen

    runners = {"hote": run_hote, "score": run_score}
    texts = (ROOT / "tests" / "data" / "training" / "examples.jsonl").read_text().splitlines()
    for name in loops:
        for batch in (int(b) for b in a.batches.split(",")):
            with tempfile.TemporaryDirectory() as tmp_dir:
                tmp = Path(a.work) / f"{name}-B{batch}" if a.work else Path(tmp_dir)
                tmp.mkdir(parents=True, exist_ok=True)
                rows = runners[name](a, batch, tmp, build_tiny_qwen(tmp / "model", texts))
            summary(name, batch, rows)


if __name__ == "__main__":
    main()
