"""Synthesis benchmark: the main job (``run_build``) against a fake OpenAI-compatible server with fixed latency.

Prints LLM calls and tokens per tree and per retained example, and the wall time at each concurrency
level against two ideals computed in the same run:

* ``requests x latency / C``: what C always-busy, interchangeable request slots would need for this
  level's requests. A lower bound only: no real schedule of this work reaches it (below).
* the ideal of the call graph: the same run with no orchestration cost. Every LLM call of the level is
  recorded (its tree, role, when issued and answered); a call depends on the calls of its tree that were
  answered before it was issued. :func:`simulate` replays that graph with every call taking exactly its
  requests x latency and each role's slots served as the client's limits serve them: the lowest tree
  first (``llm.limits.PRIORITY``), then first ready. The gap between wall time and this ideal is what the
  orchestration costs: the issue's "overhead against the ideal". It exceeds the first ideal because the
  slots are not interchangeable and the calls are not independent: the verifier's C // 8 slots only get
  work at the end of each tree, and no tree finishes faster than its longest chain of dependent calls
  (printed too). Serving the earliest trees first lets them reach the verifier while the others are still
  built; first come first served (before the priority) moved all trees in step, and at 1 s and C = 64
  all 128 verifications queued on 8 slots at the end (wall 34-35 s; 26 s with the priority).

    .venv/bin/python benchmarks/synthesis.py                       # levels 1,4,16,64 at 50 ms per call
    .venv/bin/python benchmarks/synthesis.py --latency-ms 1000 --levels 16,64 --trees 1 --json out.json

A level. Concurrency C = LLM requests in flight: every role uses the same model and ``api_base``;
concurrency limits are per role, so the generator gets C - C // 8 slots and the verifier C // 8 (at least
one each; C = 1 runs both roles with one slot each, one request of each at most). Level C builds ``--trees`` x C
trees, all admitted at once (``build.tree_concurrency`` = the number of trees), so only the LLM slots
limit the work. Scaling the trees with C keeps the work per slot about equal at every level
(``--trees`` x calls per tree x latency). The orchestration is the LLM client (the direct HTTP client,
as for any ``openai/`` model with an api_base), retrieval and query embedding on the event loop, the rule
checks, the stage logs, the manifest and the export. Each level runs in a fresh run
directory with the LLM cache off, after an unreported one-tree warm-up (imports, model load). The
corpus index (``--docs`` documents of the default corpus, one seed per document) is built once, in a
temporary folder. ``--torch-threads`` (default 1) applies while the levels run: a single short query
gains nothing from more threads, and on a loaded 2-core machine two OpenMP threads that wait for each
other made every query embedding about ten times slower.

The timing line splits the wall time, by the server's first arrival and last answer, into startup
(opening the index), the LLM phase and the finish (the build summary), and gives the pipeline's CPU time
per request: below a latency of about C x that, the client's CPU, not the LLM, bounds the level. Above
it, expect an overhead of about C x CPU per request / latency: with a fixed latency the trees move in
step, and the work that follows each round of C answers runs on the one event loop. The fake server's
CPU per request is printed too: it runs on the same cores, as do other programs (note the load average).

The fake server (:class:`rubricforge.testing.FakeOpenAI`) runs in its own process, so it does not
compete with the pipeline for the GIL. It answers every request after exactly the latency with the
schema-valid answer of ``tests/support/pipeline_fake.py`` (built from the prompt; the verifier answers KEEP),
its merge asking only what its rubrics check (:func:`covered`), so every candidate passes the rule checks,
coverage included, and goes on to the verifier: the whole path is measured, and the rows are retained.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from heapq import heapify, heappop, heappush
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "tests"))  # the fake pipeline model

from rubricforge.testing import FakeOpenAI, Reply  # noqa: E402
from support.pipeline_fake import pipeline_answer  # noqa: E402

from rubricforge.config import Config, load_config  # noqa: E402

MODEL = "openai/fake-fixed-latency"
_TREE: ContextVar[int] = ContextVar("synthesis_benchmark_tree", default=-1)


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
        reply = pipeline_answer(body, self.latency_s)
        merge = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "").startswith("MergeOutput")
        return covered(reply) if merge else reply


ASKED = re.compile(r"^What does the evidence establish about (?P<topic>.+), and which of its facets remain open\?$")


def covered(reply: Reply) -> Reply:
    """The pipeline fake's answer, its merge's question cut to what the rubrics check: the fake's second clause
    ("which of its facets remain open") is checked by none of them, so the coverage check would fail every
    candidate; the first clause gets a rubric of its own."""
    answer = json.loads(reply.content)
    asked = ASKED.match(answer["question"])
    if asked is None:
        return reply
    topic = asked.group("topic")
    answer["question"] = f"What does the evidence establish about {topic}?"
    answer["rubrics"][-1]["description"] = f"States what the evidence establishes about {topic}."
    return replace(reply, content=json.dumps(answer, ensure_ascii=False))


def serve(conn: Any, latency_s: float) -> None:
    """The fake server's process: sends its api_base, then answers "stats" (and resets them) until "stop"."""
    responder = Responder(latency_s)
    with FakeOpenAI(responder=responder, keep_requests=False) as fake:
        conn.send(fake.api_base)
        cpu = time.process_time()
        while conn.recv() == "stats":
            conn.send({"first": responder.first, "last": responder.last, "requests": fake.n_requests,
                       "max_in_flight": fake.max_in_flight, "cpu_s": time.process_time() - cpu})
            responder.reset()
            cpu = time.process_time()
            fake.n_requests = fake.max_in_flight = 0


# ---------------------------------------------------------------- the call graph and the ideals


@contextmanager
def traced_calls() -> Any:
    """Records every LLM call of the trees built inside: (tree, role, issued, answered, requests), times
    from ``time.monotonic()``. Wraps ``TreeWorker.run`` (which tree) and ``LLMClient.generate``."""
    from rubricforge.llm.client import LLMClient
    from rubricforge.pipelines.tree.run import TreeWorker

    calls: list[tuple[int, str, float, float, int]] = []
    run, generate = TreeWorker.run, LLMClient.generate

    async def traced_run(worker: Any, seed: Any, *args: Any, **kwargs: Any) -> Any:
        _TREE.set(seed.index)  # this tree's task; the tasks it starts inherit it
        return await run(worker, seed, *args, **kwargs)

    async def traced_generate(client: Any, role: str, *args: Any, **kwargs: Any) -> Any:
        issued = time.monotonic()
        res = await generate(client, role, *args, **kwargs)
        calls.append((_TREE.get(), role, issued, time.monotonic(), res.attempts))
        return res

    TreeWorker.run, LLMClient.generate = traced_run, traced_generate  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        TreeWorker.run, LLMClient.generate = run, generate  # type: ignore[method-assign]


def simulate(calls: list[tuple[int, str, float, float, int]], slots: dict[str, int] | None, latency_s: float) -> float:
    """The makespan of the recorded calls with no orchestration cost: every call takes its requests x latency,
    waits for the calls it depends on and then for a free slot of its role, served as the client's limits
    serve them: lowest tree first (the tree's priority), then first ready (``slots`` None: unlimited, the
    longest chain). A call depends on the calls of its tree answered before it was issued."""
    deps: list[list[int]] = [[] for _ in calls]
    by_tree: dict[int, list[int]] = defaultdict(list)
    for i, (tree, *_rest) in enumerate(calls):
        by_tree[tree].append(i)
    for ids in by_tree.values():
        for i in ids:
            deps[i] = [j for j in ids if calls[j][3] <= calls[i][2]]
    waiting = [len(d) for d in deps]
    dependents: list[list[int]] = [[] for _ in calls]
    for i, d in enumerate(deps):
        for j in d:
            dependents[j].append(i)
    free = {role: (n if slots else len(calls)) for role, n in (slots or {c[1]: 0 for c in calls}).items()}
    queued: dict[str, list[tuple[int, float, int]]] = defaultdict(list)  # role -> (tree, ready time, call)
    events = [(0.0, 1, i) for i, n in enumerate(waiting) if n == 0]  # (time, 0 answered | 1 ready, call)
    heapify(events)
    end = 0.0
    while events:
        now = events[0][0]
        while events and events[0][0] == now:  # everything that happens at this instant, then the slots
            _, kind, i = heappop(events)
            if kind == 1:
                heappush(queued[calls[i][1]], (calls[i][0], now, i))
                continue
            free[calls[i][1]] += 1
            end = max(end, now)
            for k in dependents[i]:
                waiting[k] -= 1
                if waiting[k] == 0:
                    heappush(events, (now, 1, k))
        for role, ready in queued.items():
            while ready and free[role] > 0:
                _, _, i = heappop(ready)
                free[role] -= 1
                heappush(events, (now + calls[i][4] * latency_s, 0, i))
    return end


# ---------------------------------------------------------------- the levels


def role_slots(concurrency: int) -> dict[str, int]:
    verifier = max(1, concurrency // 8) if concurrency > 1 else 1
    return {"generator": max(1, concurrency - verifier), "verifier": verifier, "judge": verifier}


def level_config(base: Config, api_base: str, concurrency: int, n_trees: int, run_dir: Path) -> Config:
    """C slots in all: the verifier (one call per tree, at its end) gets C // 8 of them (at least 1), the
    generator the rest (concurrency limits are per role)."""
    role = {"backend": "litellm", "model": MODEL, "api_base": api_base, "timeout_s": 60.0, "max_retries": 0}
    data = base.model_dump(mode="json")
    slots = role_slots(concurrency)
    data["llm"].update({r: {**data["llm"][r], **role, "concurrency": n} for r, n in slots.items()})
    data["llm"]["cache_path"] = ""
    data["build"].update({"n_trees": n_trees, "tree_concurrency": n_trees})
    data["run_dir"] = str(run_dir)
    return Config.model_validate(data)


def run_level(base: Config, conn: Any, api_base: str, concurrency: int, n_trees: int, latency_s: float,
              run_dir: Path) -> dict[str, Any]:
    from rubricforge.jobs.tree import run_build

    cfg = level_config(base, api_base, concurrency, n_trees, run_dir)
    with traced_calls() as traced:
        cpu0, t0 = time.process_time(), time.time()
        summary = run_build(cfg, progress=False)
        wall, cpu = time.time() - t0, time.process_time() - cpu0
    slots = role_slots(concurrency)
    graph, chain = simulate(traced, slots, latency_s), simulate(traced, None, latency_s)
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
            "cpu_ms_per_request": 1000 * cpu / max(requests, 1),
            "server_cpu_ms_per_request": 1000 * server["cpu_s"] / max(server["requests"], 1),
            "slots": slots, "chain_s": chain, "graph_ideal_s": graph, "graph_ratio": wall / graph,
            "graph_overhead_pct": 100 * (wall / graph - 1), "graph_llm_phase_ratio": span / graph}


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
          f"(CPU-bound below {r['concurrency'] * r['cpu_ms_per_request']:.0f} ms latency; the fake server's "
          f"{r['server_cpu_ms_per_request']:.1f} ms/request on the same cores)", flush=True)
    slots = ", ".join(f"{role} {n}" for role, n in r["slots"].items() if role != "judge")
    print(f"C={r['concurrency']:<3} graph   ideal of the call graph {r['graph_ideal_s']:6.2f} s (slots: {slots}; longest "
          f"chain {r['chain_s']:5.2f} s)  wall/ideal {r['graph_ratio']:5.2f}  overhead {r['graph_overhead_pct']:6.1f}%  "
          f"(LLM phase {r['graph_llm_phase_ratio']:.2f} x ideal)", flush=True)


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
