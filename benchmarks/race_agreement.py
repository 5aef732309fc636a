"""How far a judge's pointwise RACE scores agree with DeepResearch Bench's published per-task RACE scores:
Spearman's rho over the tasks, its two-sided p-value, and a percentile-bootstrap 95 % CI of rho.

    nice -n 15 .venv/bin/python benchmarks/race_agreement.py --drb PATH/TO/deepresearch_bench \\
        --system claude-3-7-sonnet-latest --n 10 --run-dir runs/bench/race-agreement

``--drb`` is a DeepResearch Bench checkout (``data/criteria_data/criteria.jsonl``,
``data/test_data/cleaned_data/<system>.jsonl``, ``results/race/<system>/raw_results.jsonl``). The ``--n``
tasks whose report and criteria are shortest are scored (the embedded models' context is the limit; the
choice is stated in the output) with ``rubricforge eval --scorers race`` and the configured judge (default:
the embedded 1.5B model with ``--n-ctx``), resumably in ``--run-dir``: run it again with a larger ``--n`` to
add tasks. Unscored tasks (the judge's answer failed validation) are counted and left out of rho. DRB ships
no reference reports, so the judge's scores are pointwise (S / 10) and the published ones reference-relative:
the comparison is of ranks, not of values.

A judge too slow here can answer elsewhere: ``--capture FILE`` records the judge's requests (first attempts only:
``llm.judge.structured_retries=0``) instead of judging, ``benchmarks/gpu_judge.py`` answers them on a GPU, and
``--answers ANSWERS`` scores the tasks with those answers through the replay backend (docs/gpu.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rubricforge.config import load_config  # noqa: E402
from rubricforge.jobs.evaluate import evaluate, read_run  # noqa: E402


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def spearman(a: list[float], b: list[float], resamples: int = 2000, seed: int = 0) -> dict[str, float | None]:
    """rho, its p-value (scipy) and the percentile-bootstrap 95 % CI of rho over resampled tasks."""
    from scipy.stats import spearmanr

    rho, p = spearmanr(a, b)
    x, y = np.asarray(a), np.asarray(b)
    rng = np.random.default_rng(seed)
    boots = []
    for idx in rng.integers(0, len(x), (resamples, len(x))):
        if np.ptp(x[idx]) > 0 and np.ptp(y[idx]) > 0:
            boots.append(spearmanr(x[idx], y[idx])[0])
    lo, hi = np.quantile(boots, [0.025, 0.975]) if boots else (None, None)
    return {"rho": float(rho), "p": float(p), "ci_low": None if lo is None else float(lo),
            "ci_high": None if hi is None else float(hi)}


def capture(args: argparse.Namespace, sets: list[str], criteria: Path, subset: Path) -> None:
    """The judge's requests for the chosen tasks, recorded (``llm.record_path``) from a stand-in OpenAI-compatible
    judge on loopback whose every answer is ``{}`` (so each task is left unscored); ``<capture>.judge.json`` holds
    the judge's model and endpoint, which a request's key includes."""
    from rubricforge.testing import FakeOpenAI, Reply

    args.capture.unlink(missing_ok=True)
    with FakeOpenAI(responder=lambda body: Reply(content="{}"), keep_requests=False, models=["judge"]) as server:
        judge = {"model": "openai/judge", "api_base": server.api_base}
        cfg = load_config(None, [*sets, "llm.judge.backend=litellm", f"llm.judge.model={judge['model']}",
                                 f"llm.judge.api_base={judge['api_base']}", "llm.judge.temperature=0.0",
                                 f"llm.record_path={args.capture}"])
        evaluate(cfg, criteria, subset, args.run_dir / "capture", asked=["race"], progress=False)
    args.capture.with_suffix(".judge.json").write_text(json.dumps(judge), encoding="utf-8")
    print(f"{sum(1 for _ in args.capture.open())} judge requests of {args.n} tasks -> {args.capture}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drb", type=Path, required=True, help="DeepResearch Bench folder")
    ap.add_argument("--system", default="claude-3-7-sonnet-latest")
    ap.add_argument("--n", type=int, default=10, help="tasks (the shortest report + criteria first)")
    ap.add_argument("--run-dir", type=Path, default=Path("runs/bench/race-agreement"))
    ap.add_argument("--n-ctx", type=int, default=16384, help="the embedded judge's context window")
    ap.add_argument("--max-tokens", type=int, default=4096, help="the judge's answer limit")
    ap.add_argument("--set", dest="set_", action="append", default=[], help="config override key=value")
    ap.add_argument("--capture", type=Path, help="write the judge's requests here instead of judging (see above)")
    ap.add_argument("--answers", type=Path, help="judge with these recorded answers (benchmarks/gpu_judge.py's)")
    args = ap.parse_args()
    criteria = args.drb / "data/criteria_data/criteria.jsonl"
    reports = read_jsonl(args.drb / f"data/test_data/cleaned_data/{args.system}.jsonl")
    published = {str(r["id"]): float(r["overall_score"])
                 for r in read_jsonl(args.drb / f"results/race/{args.system}/raw_results.jsonl")}
    sizes = {str(r["id"]): len(json.dumps(r, ensure_ascii=False)) for r in read_jsonl(criteria)}
    chosen = sorted(reports, key=lambda r: len(r["article"]) + sizes[str(r["id"])])[:args.n]
    args.run_dir.mkdir(parents=True, exist_ok=True)
    subset = args.run_dir / "reports.jsonl"
    subset.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen), encoding="utf-8")
    sets = [f"llm.judge.n_ctx={args.n_ctx}", f"llm.judge.max_tokens={args.max_tokens}", "reward.concurrency=1",
            *(["llm.judge.structured_retries=0"] if args.capture or args.answers else []), *args.set_]
    started = time.perf_counter()
    if args.capture:
        capture(args, sets, criteria, subset)
        return
    if args.answers:
        judge = json.loads(args.answers.with_suffix(".judge.json").read_text(encoding="utf-8"))
        sets += ["llm.judge.backend=replay", f"llm.judge.model={judge['model']}", f"llm.judge.api_base={judge['api_base']}",
                 f"llm.replay_path={args.answers}", "llm.judge.temperature=0.0"]
    cfg = load_config(None, sets)
    evaluate(cfg, criteria, subset, args.run_dir / "eval", asked=["race"], progress=False)
    wall = time.perf_counter() - started
    scores = read_run(args.run_dir / "eval")
    ids = [str(r["id"]) for r in chosen if str(r["id"]) in scores]
    scored = [i for i in ids if scores[i].get("race") is not None]
    judge = f"answers of {args.answers}" if args.answers else f"judge {cfg.llm.judge.model} (n_ctx {args.n_ctx})"
    print(f"{judge}: {len(chosen)} tasks (the shortest report + criteria "
          f"of {len(reports)}), {len(scored)} scored, {len(ids) - len(scored)} unscored; {wall:.0f} s this run")
    if len(scored) >= 3 and len({scores[i]["race"] for i in scored}) == 1:
        print(f"Spearman rho undefined: the judge gave all {len(scored)} scored tasks the same score")
    elif len(scored) >= 3:
        got = spearman([scores[i]["race"] for i in scored], [published[i] for i in scored])  # type: ignore[misc]
        ci = "n/a" if got["ci_low"] is None else f"[{got['ci_low']:.2f}, {got['ci_high']:.2f}]"
        print(f"Spearman rho {got['rho']:.3f} over n={len(scored)} tasks, p={got['p']:.3f}, bootstrap 95% CI {ci}")
    for i in scored:
        print(f"  task {i}: judge {scores[i]['race']:.3f}  published {published[i]:.3f}")


if __name__ == "__main__":
    main()
