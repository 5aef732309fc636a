"""`rubricforge rubrics eval` end to end: real client, cache, run directory and metrics; the judge and the rubric
generator are a scripted OpenAI-compatible server (:data:`pref_fakes.PREFS_JUDGE`)."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

from rubricforge.cli import app
from rubricforge.config import load_config
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.pref_fakes import PREFS_JUDGE

QUERY = "Please generate an analysis report on common network failures."


def _pairs(tmp_path):
    rows = [("p1", "GOOD one", "weak one"), ("p2", "GOOD two", "weak two"), ("p3", "GOOD three", "weak three"),
            ("p4", "weak four", "GOOD four"), ("p5", "BROKEN five", "weak five")]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "query": QUERY, "report_chosen": c, "report_rejected": r,
                                        "split": "test", "degradation": "facts" if i != "p4" else "padding"}) + "\n"
                            for i, c, r in rows))
    return path


def _files(tmp_path):
    race = tmp_path / "criteria.jsonl"
    race.write_text(json.dumps({"id": 7, "prompt": QUERY, "language": "en",
                                "dimension_weight": {"comprehensiveness": 0.6, "readability": 0.4},
                                "criterions": {"comprehensiveness": [{"criterion": "Covers DNS", "explanation": "x",
                                                                      "weight": 1.0, "aspect": "dropped"}],
                                               "readability": [{"criterion": "Clear", "weight": 1.0}]}}) + "\n")
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(json.dumps({"id": "t1", "question": QUERY, "rubrics": [
        {"id": "R1", "type": "factual", "description": "Names DNS failures", "weight": 2},
        {"id": "R2", "type": "logical", "description": "Explains causes", "weight": 1}]}) + "\n")
    return race, dataset


def _config(tmp_path, server):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "reward": {"concurrency": 2},
                                    "llm": litellm_llm_config(tmp_path, server, structured_retries=1)}))
    return path


def test_rubrics_eval_table_run_dir_and_resume(tmp_path):
    from rubricforge.jobs.rubric_eval import evaluate_rubrics

    pairs, (race, dataset) = _pairs(tmp_path), _files(tmp_path)
    with FakeOpenAI(stages=PREFS_JUDGE) as server:
        cfg = load_config(_config(tmp_path, server))
        sources = ["general", "generated", "closed-book", "race", "tree"]
        result = evaluate_rubrics(cfg, pairs, sources, race_file=race, dataset=dataset, n_boot=200, progress=False).summary
        first = server.n_requests
        again = evaluate_rubrics(cfg, pairs, sources, race_file=race, dataset=dataset, n_boot=200, progress=False).summary
        asked_again = server.requests[first:]

    for s in result.sources:
        m = s.metrics
        # 3 of 4 scored pairs prefer the GOOD report; Δ = (a, a, a, -a) => d = (a/2) / a = 0.5 whatever a is
        assert (s.pairs, m["n"], m["unscored"], m["ties"], m["accuracy"]) == (5, 4, 1, 0, 0.75), s.source
        assert m["cohens_d"] == pytest.approx(0.5) and m["accuracy_ci"][0] <= 0.75 <= m["accuracy_ci"][1]
        assert s.by_degradation["facts"]["accuracy"] == 1.0 and s.by_degradation["padding"]["accuracy"] == 0.0
        assert s.judge_calls > 0 and s.rubrics_missing == 0
    general = result.sources[0]
    # the general rubric (weights 5,5,4,4,3,3,2,-2,-1): S(good) = 199/207, S(bad) = 54/207
    assert general.metrics["mean_delta"] == pytest.approx((3 * 145 / 207 - 145 / 207) / 4)
    # each of the 10 distinct reports is judged once per item; BROKEN's 9 items were re-prompted once each
    assert (general.judge_calls, general.judge_requests) == (10 * 9, 10 * 9 + 9)
    out = tmp_path / "run" / "rubric-eval"
    rubrics = [json.loads(line) for line in (out / "rubrics.jsonl").read_text().splitlines()]
    assert {r["source"]: len(r["rubrics"]) for r in rubrics} == {"general": 9, "generated": 13, "closed-book": 5, "race": 2, "tree": 2}
    assert {r["source"]: r["origin"] for r in rubrics}["race"] == "race_file"
    assert "| general | 4 | 75.0 [" in (out / "table.md").read_text()
    assert json.loads((out / "summary.json").read_text())["sources"][1]["source"] == "generated"
    # resumed: only the unscored pair (the BROKEN report) was asked again; the table is the same
    assert asked_again and all("BROKEN" in json.dumps(r) for r in asked_again)
    assert [s.metrics for s in again.sources] == [s.metrics for s in result.sources]


def test_rubrics_eval_cli(tmp_path):
    pairs = _pairs(tmp_path)
    with FakeOpenAI(stages=PREFS_JUDGE) as server:
        res = CliRunner().invoke(app, ["rubrics", "eval", "--pairs", str(pairs), "--source", "general", "-q",
                                       "-c", str(_config(tmp_path, server))])
    assert res.exit_code == 1, res.output  # the BROKEN pair stays unscored: re-run to retry it (the ending rule)
    assert "incomplete: 1 of 5 pairs unscored; finished work is kept" in res.output
    assert "Pref. Acc." in res.output and "75.0" in res.output and "rubric-eval/table.md" in res.output
    res = CliRunner().invoke(app, ["rubrics", "eval", "--pairs", str(pairs), "--source", "vibes"],
                             standalone_mode=False)
    assert "unknown rubric source 'vibes'" in str(res.exception)
    res = CliRunner().invoke(app, ["rubrics", "eval", "--pairs", str(pairs), "--source", "tree"],
                             standalone_mode=False)
    assert "the tree source needs the dataset" in str(res.exception)


def test_a_rubric_without_positive_weight_is_not_used(tmp_path):
    from rubricforge.config import Config
    from rubricforge.jobs.rubric_eval import RubricMaker, _digest
    from rubricforge.io.stagelog import StageLog

    log = StageLog(tmp_path / "rubrics.jsonl")
    log.append(f"search|{_digest(QUERY)}", {"source": "search", "query": QUERY, "origin": "m", "rubrics": [
        {"id": "R1", "type": "logical", "description": "Rambles about the question.", "weight": -1.0}]})
    maker = RubricMaker(Config(), None, log, None, None)  # a logged rubric needs no model
    assert asyncio.run(maker.get("search", QUERY)) is None  # S(r|y) has no scale: its pairs stay unscored


def _baseline_judge(body):
    """C.12: [[8]] for a GOOD report, [[3]] for a weak one, no verdict for BROKEN; C.11: the GOOD report wins."""
    import re

    from rubricforge.testing import Reply

    user = body["messages"][-1]["content"]
    if "[The Start of Assistant As Answer]" in user:
        a = re.search(r"Assistant As Answer\]\n(.*?)\n\[The End", user, re.S).group(1)
        return Reply("A is more thorough. [[A]]" if "GOOD" in a else "B is better. [[B]]")
    answer = re.search(r"Assistants Answer\]\n(.*?)\n\[The End", user, re.S).group(1)
    return Reply("no verdict" if "BROKEN" in answer else "[[8]]" if "GOOD" in answer else "Fine. [[3]]")


def test_table_1_pointwise_and_pairwise_judge_baselines(tmp_path):
    """Seed 004 Table 1's judge baselines (App. C.11, C.12) beside the rubric sources: pointwise scores each report
    alone; pairwise shows both, the chosen one first for half the pairs, and gives no Cohen's d."""
    from rubricforge.jobs.rubric_eval import _digest, evaluate_rubrics

    pairs = _pairs(tmp_path)
    with FakeOpenAI(responder=_baseline_judge) as server:
        result = evaluate_rubrics(load_config(_config(tmp_path, server)), pairs, ["pointwise", "pairwise"], n_boot=100,
                          progress=False).summary
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    point, pair = result.sources
    # pointwise: p1-p3 GOOD (8) over weak (3), p4 weak chosen, p5 BROKEN unscored; S = (v - 1) / 9
    assert (point.metrics["n"], point.metrics["unscored"], point.metrics["accuracy"]) == (4, 1, 0.75)
    assert point.metrics["mean_delta"] == pytest.approx((3 * 5 / 9 - 5 / 9) / 4) and point.metrics["cohens_d"] == pytest.approx(0.5)
    # pairwise: the judge prefers the GOOD report wherever it stands (p1-p3 right, p4 wrong); p5 has none, so the
    # judge names B, which is the chosen report only when the chosen one was shown second
    firsts = {i: int(_digest(i), 16) % 2 == 0 for i in ("p1", "p2", "p3", "p4", "p5")}
    assert (pair.metrics["n"], pair.metrics["accuracy"], pair.metrics["cohens_d"]) == (5, (3 + (not firsts["p5"])) / 5, None)
    assert 0 < sum(firsts.values()) < 5  # both orders occur
    shown = [p for p in prompts if "Assistant As Answer" in p]
    assert len(shown) == 5 and sum(p.index("GOOD one") < p.index("weak one") for p in shown if "GOOD one" in p) == firsts["p1"]
    assert f"| pairwise | 5 | {100 * pair.metrics['accuracy']:.1f} [" in (tmp_path / "run" / "rubric-eval" / "table.md").read_text()
