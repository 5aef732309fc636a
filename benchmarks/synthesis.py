"""Synthesis benchmark: the main job (``run_build``) against a fake OpenAI-compatible server with fixed latency.

Prints LLM calls and tokens per tree and per retained example, and the wall time at each concurrency
level against the ideal measured in the same run: ideal = total LLM latency / concurrency
= requests x latency / C, what C always-busy request slots would need for this level's requests.

    .venv/bin/python benchmarks/synthesis.py                       # levels 1,4,16,64 at 50 ms per call
    .venv/bin/python benchmarks/synthesis.py --latency-ms 1000 --levels 16,64 --trees 1 --json out.json

A level. Concurrency C = LLM requests in flight: every role uses the same model and ``api_base``;
concurrency limits are per role, so the generator gets C - C // 8 slots and the verifier C // 8 (at least
one each; C = 1 runs both roles with one slot each, one request of each at most). Level C builds ``--trees`` x C
trees, all admitted at once (``build.tree_concurrency`` = the number of trees), so only the LLM slots
limit the work. Scaling the trees with C keeps the work per slot, and so the ideal, about equal at
every level (``--trees`` x calls per tree x latency) and well above the critical path of one tree
(about ten dependent calls: extract, decompose, ground, extract, ..., merge, verify). The gap between
wall time and the ideal is then orchestration: the LLM client (the direct HTTP client, as for any ``openai/``
model with an api_base), retrieval and query embedding on the event loop, the rule checks, the stage logs, the
manifest and the export. Each level runs in a fresh run
directory with the LLM cache off, after an unreported one-tree warm-up (imports, model load). The
corpus index (``--docs`` documents of the default corpus, one seed per document) is built once, in a
temporary folder. ``--torch-threads`` (default 1) applies while the levels run: a single short query
gains nothing from more threads, and on a loaded 2-core machine two OpenMP threads that wait for each
other made every query embedding about ten times slower.

The timing line splits the wall time, by the server's first arrival and last answer, into startup
(opening the index), the LLM phase and the finish (export, viewer), and gives the pipeline's CPU time
per request: below a latency of about C x that, the client's CPU, not the LLM, bounds the level. Above
it, expect an overhead of about C x CPU per request / latency: with a fixed latency the trees move in
step, and the work that follows each round of C answers runs on the one event loop.

The fake server (``tests/llm_fakes.py``'s :class:`FakeOpenAI`) runs in its own process, so it does not
compete with the pipeline for the GIL. It answers every request after exactly the latency with the
schema-valid answer of ``tests/pipeline_fake.py`` (built from the prompt; the verifier answers KEEP).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "tests"))  # the fake server

from llm_fakes import FakeOpenAI, Reply  # noqa: E402
from pipeline_fake import pipeline_answer  # noqa: E402

from rubricforge.config import Config, load_config  # noqa: E402

MODEL = "openai/fake-fixed-latency"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency-ms", type=float, default=50.0, help="fixed latency of every fake LLM call")
    ap.add_argument("--levels", default="1,4,16,64", help="comma list of concurrency levels")
    ap.add_argument("--trees", type=int, default=2, help="trees per concurrency slot: level C builds trees x C trees")
    ap.add_argument("--docs", type=int, default=300, help="corpus.limit for the index (one seed per document)")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch threads while the levels run (0: torch's default)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    return ap.parse_args()


class Responder:
    """Answers one chat request after ``latency_s`` with a valid answer for its output schema, and keeps
    the level's first arrival and last answer times (``time.time()``, comparable across processes)."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.first, self.last = float("inf"), 0.0

    def __call__(self, body: dict[str, Any]) -> Reply:
        now = time.time()
        with self._lock:
            self.first, self.last = min(self.first, now), max(self.last, now + self.latency_s)
        return pipeline_answer(body, self.latency_s)


def serve(conn: Any, latency_s: float) -> None:
    """The fake server's process: sends its api_base, then answers "stats" (and resets them) until "stop"."""
    responder = Responder(latency_s)
    with FakeOpenAI(responder=responder, keep_requests=False) as fake:
        conn.send(fake.api_base)
        while conn.recv() == "stats":
            conn.send({"first": responder.first, "last": responder.last, "requests": fake.n_requests,
                       "max_in_flight": fake.max_in_flight})
            responder.reset()
            fake.n_requests = fake.max_in_flight = 0


# ---------------------------------------------------------------- the levels


def level_config(base: Config, api_base: str, concurrency: int, n_trees: int, run_dir: Path) -> Config:
    """C slots in all: the verifier (one call per tree, at its end) gets C // 8 of them (at least 1), the
    generator the rest (concurrency limits are per role)."""
    role = {"backend": "litellm", "model": MODEL, "api_base": api_base, "timeout_s": 60.0, "max_retries": 0}
    verifier = max(1, concurrency // 8) if concurrency > 1 else 1
    slots = {"generator": max(1, concurrency - verifier), "verifier": verifier, "judge": verifier}
    data = base.model_dump(mode="json")
    data["llm"].update({r: {**data["llm"][r], **role, "concurrency": n} for r, n in slots.items()})
    data["llm"]["cache_path"] = ""
    data["build"].update({"n_trees": n_trees, "tree_concurrency": n_trees})
    data["run_dir"] = str(run_dir)
    return Config.model_validate(data)


def run_level(base: Config, conn: Any, api_base: str, concurrency: int, n_trees: int, latency_s: float,
              run_dir: Path) -> dict[str, Any]:
    from rubricforge.jobs.tree import run_build

    cfg = level_config(base, api_base, concurrency, n_trees, run_dir)
    cpu0, t0 = time.process_time(), time.time()
    summary = run_build(cfg, progress=False)
    wall, cpu = time.time() - t0, time.process_time() - cpu0
    conn.send("stats")
    server = conn.recv()
    led = summary.ledger
    calls, requests = int(led["calls"]), int(led["requests"])
    tokens = int(led["prompt_tokens"] + led["completion_tokens"])
    ideal = requests * latency_s / concurrency
    span = server["last"] - server["first"]
    trees, retained = max(summary.trees, 1), max(summary.retained, 1)
    stages = json.loads((run_dir / "manifest.json").read_text())["ledger"]["by_stage"]
    return {"concurrency": concurrency, "status": summary.status, "trees": summary.trees, "nodes": summary.nodes,
            "retained": summary.retained, "rule_failures": summary.rule_failures, "calls": calls,
            "requests": requests, "failures": int(led["failures"]), "tokens": tokens,
            "calls_per_tree": calls / trees, "tokens_per_tree": tokens / trees,
            "calls_per_retained": calls / retained, "tokens_per_retained": tokens / retained,
            "calls_per_tree_by_stage": {stage: v["calls"] / trees for stage, v in stages.items()},
            "server_requests": server["requests"], "max_in_flight": server["max_in_flight"],
            "wall_s": wall, "ideal_s": ideal, "ratio": wall / ideal,
            "overhead_pct": 100 * (wall / ideal - 1), "startup_s": server["first"] - t0, "llm_phase_s": span,
            "llm_phase_ratio": span / ideal, "finish_s": t0 + wall - server["last"],
            "cpu_ms_per_request": 1000 * cpu / max(requests, 1)}


def print_level(r: dict[str, Any]) -> None:
    status = "" if r["status"] == "complete" else f"  [{r['status']}]"
    print(f"C={r['concurrency']:<3} work    {r['trees']:>4} trees  {r['retained']:>4} retained  {r['requests']:>6} "
          f"requests ({r['failures']} failed calls)  per tree {r['calls_per_tree']:5.1f} calls "
          f"{r['tokens_per_tree']:6.0f} tokens  per retained example {r['calls_per_retained']:5.1f} calls "
          f"{r['tokens_per_retained']:6.0f} tokens{status}")
    print(f"C={r['concurrency']:<3} stages  calls per tree: "
          + ", ".join(f"{stage} {n:.1f}" for stage, n in r["calls_per_tree_by_stage"].items()))
    print(f"C={r['concurrency']:<3} timing  wall {r['wall_s']:6.2f} s  ideal {r['ideal_s']:6.2f} s  "
          f"wall/ideal {r['ratio']:5.2f}  overhead {r['overhead_pct']:6.1f}%  (startup {r['startup_s']:4.2f} s, "
          f"LLM phase {r['llm_phase_s']:6.2f} s = {r['llm_phase_ratio']:.2f} x ideal, finish {r['finish_s']:4.2f} s)  "
          f"peak in flight {r['max_in_flight']:>2}  CPU {r['cpu_ms_per_request']:4.1f} ms/request "
          f"(CPU-bound below {r['concurrency'] * r['cpu_ms_per_request']:.0f} ms latency)", flush=True)


def main() -> None:
    import torch

    from rubricforge.corpora.indexing import build_index

    args = parse_args()
    levels = [int(c) for c in args.levels.split(",")]
    results: dict[str, Any] = {"latency_ms": args.latency_ms, "trees_per_slot": args.trees,
                               "torch_threads": args.torch_threads, "cpus": os.cpu_count(), "levels": []}
    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    server = ctx.Process(target=serve, args=(child, args.latency_ms / 1000), daemon=True)
    server.start()
    api_base = conn.recv()
    with tempfile.TemporaryDirectory(prefix="rubricforge-bench-") as tmp:
        workdir = Path(tmp)
        base = load_config(None, {"corpus": {"limit": max(args.docs, args.trees * max(levels))},
                                  "tools": {"index_dir": str(workdir / "index")}})
        t = time.perf_counter()
        info = build_index(base, progress=False)
        print(f"index      {base.corpus.limit} documents of the default corpus -> {info.n_passages} passages in "
              f"{time.perf_counter() - t:.1f} s; fake LLM latency {args.latency_ms:g} ms per call; "
              f"{args.trees} trees per concurrency slot; {os.cpu_count()} CPUs, torch threads "
              f"{args.torch_threads or torch.get_num_threads()}", flush=True)
        if args.torch_threads:
            torch.set_num_threads(args.torch_threads)
        run_level(base, conn, api_base, 1, 1, args.latency_ms / 1000, workdir / "warm-up")  # imports, model load
        for c in levels:
            row = run_level(base, conn, api_base, c, args.trees * c, args.latency_ms / 1000, workdir / f"run-c{c}")
            results["levels"].append(row)
            print_level(row)
        conn.send("stop")
    server.join(timeout=10)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
