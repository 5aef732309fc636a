"""`rubricforge eval`: DeepResearch Bench reports scored with RACE (pointwise and reference-relative) by a
scripted judge, the rubric judge on tree rows, exact answers on KG rows, resume, the statistics against
hand-computed values, `eval compare`, the HTML report, and bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from rubricforge.agent.prompt import no_tool_system_prompt
from rubricforge.config import Config, load_config
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.evaluation.agents import estimate, load_agent_config
from rubricforge.evaluation.exact import exact_scores
from rubricforge.evaluation.report import histogram
from rubricforge.evaluation.stats import bootstrap_ci, describe, paired, sign_test
from rubricforge.evaluation.tasks import load_reports, load_tasks, report_text, scorers_for
from rubricforge.jobs.evaluate import compare, evaluate
from rubricforge.rewards.minddr.race import PointwiseJudgement, score_pointwise
from rubricforge.schema import RaceRubrics
from rubricforge.testing import FakeOpenAI, Reply
from support.cli import assert_user_error, cli
from support.exchanged_formats import RESEARCHRUBRICS, RUBRICHUB, VERLRUBRIC
from support.config import derive
from support.llm_fakes import litellm_llm_config
from support.paths import DATA
from support.reward_fixtures import EXAMPLE, RACE, SCRIPTED_JUDGE

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
DATA = DATA
DRB_TASKS = DATA / "formats" / "drb_criteria.jsonl"  # tasks 1, 46, 51, 75
DRB_REPORTS = DATA / "eval" / "drb_claude-3-7-sonnet-latest.jsonl"  # reports of tasks 1, 51, 75
POINTS = {"comprehensiveness": 8, "insight": 6, "instruction_following": 4, "readability": 2}
# pointwise RACE with POINTS: sum_d W_d * POINTS[d] / 10 with each task's dimension weights (criteria file)
POINTWISE = {"1": (0.3 * 8 + 0.36 * 6 + 0.2 * 4 + 0.14 * 2) / 10, "51": (0.3 * 8 + 0.33 * 6 + 0.22 * 4 + 0.15 * 2) / 10,
             "75": (0.29 * 8 + 0.35 * 6 + 0.22 * 4 + 0.14 * 2) / 10}


def _pointwise(body: dict) -> str:
    """RACE pointwise: every criterion of a dimension scores POINTS[dimension]."""
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    criteria = json.loads(re.search(r"<criteria_list>(.*?)</criteria_list>", prompt, re.S).group(1))
    return json.dumps({d: [{"criterion": c["criterion"], "score": POINTS[d]} for c in cs] for d, cs in criteria.items()})


# RACE scripted per dimension: pointwise POINTS; reference-relative 6 (target) vs 4 (reference); the other
# stages as reward_fixtures.SCRIPTED_JUDGE answers them
RACE_JUDGE = {**SCRIPTED_JUDGE, "race_pointwise": _pointwise}


def _cfg(tmp_path, server, **role):
    return load_config(overrides={"llm": litellm_llm_config(tmp_path, server, **role)})


def _config_file(tmp_path, server, **role) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, server, **role)}))
    return str(path)


def _records(run: Path) -> dict[str, dict]:
    return {r["key"]: r for r in map(json.loads, (run / "tasks.jsonl").read_text().splitlines())}


# ---------------------------------------------------------------- statistics, hand-computed


def test_sign_test_exact_values():
    assert sign_test(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)  # 0.109375
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(5, 5) == 1.0 and sign_test(0, 0) == 1.0 and sign_test(1, 0) == 1.0


def test_bootstrap_with_a_fixed_seed_is_the_percentile_interval_of_the_resampled_means():
    values = [0.0, 1.0, 1.0, 0.5]
    idx = np.random.default_rng(7).integers(0, 4, (5, 4))
    means = sorted(np.asarray(values)[idx].mean(axis=1))
    # numpy's linear quantile: position q * (n - 1) among the 5 sorted means
    lo = means[0] + 0.025 * 4 * (means[1] - means[0])
    hi = means[3] + (0.975 * 4 - 3) * (means[4] - means[3])
    assert bootstrap_ci(values, resamples=5, seed=7) == pytest.approx((lo, hi))
    assert bootstrap_ci(values, resamples=5, seed=7) == bootstrap_ci(values, resamples=5, seed=7)
    assert bootstrap_ci([0.3] * 6) == pytest.approx((0.3, 0.3)) and bootstrap_ci([]) is None


def test_bootstrap_interval_matches_the_normal_one_on_a_large_sample():
    x = np.random.default_rng(1).normal(0.5, 0.1, 400)
    lo, hi = bootstrap_ci(list(x))
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert lo == pytest.approx(x.mean() - half, abs=0.002) and hi == pytest.approx(x.mean() + half, abs=0.002)


def test_describe_leaves_unscored_out_and_counts_them():
    got = describe([0.2, None, 0.4, 0.6])
    assert got["n"] == 3 and got["unscored"] == 1 and got["mean"] == pytest.approx(0.4)
    assert got["std"] == pytest.approx(0.2) and got["min"] == 0.2 and got["max"] == 0.6
    assert describe([None])["mean"] is None and describe([None])["ci_low"] is None


def test_paired_difference_win_tie_loss_over_shared_scored_tasks():
    a = {"t1": 0.5, "t2": 0.5, "t3": 0.5, "t4": 0.2, "t5": None, "only_a": 1.0}
    b = {"t1": 0.7, "t2": 0.5, "t3": 0.4, "t4": 0.6, "t5": 0.9, "only_b": 0.0}
    got = paired(a, b)
    assert got["n"] == 4 and (got["wins"], got["ties"], got["losses"]) == (2, 1, 1)
    assert got["diff"] == pytest.approx((0.2 + 0 - 0.1 + 0.4) / 4)
    assert got["mean_a"] == pytest.approx(0.425) and got["mean_b"] == pytest.approx(0.55)
    assert got["sign_p"] == pytest.approx(1.0) and got["ci_low"] <= got["diff"] <= got["ci_high"]
    assert got["diffs"] == pytest.approx({"t1": 0.2, "t2": 0.0, "t3": -0.1, "t4": 0.4})


# ---------------------------------------------------------------- scorers


def test_exact_match_and_token_f1_take_the_best_gold():
    assert exact_scores("The Eiffel Tower!", ["eiffel tower"]) == {"em": 1.0, "f1": 1.0}
    got = exact_scores("Paris, France", ["Paris"])
    assert got["em"] == 0.0 and got["f1"] == pytest.approx(2 / 3)
    got = exact_scores("It was completed in 1889.", ["1889", "in 1889"])  # 5 tokens; "in 1889" shares 2
    assert got["em"] == 0.0 and got["f1"] == pytest.approx(2 * 0.4 * 1 / 1.4)
    assert exact_scores("", ["1889"]) == {"em": 0.0, "f1": 0.0} and exact_scores("x", []) == {"em": 0.0, "f1": 0.0}


def test_pointwise_race_weights_criteria_then_dimensions():
    rubrics = RaceRubrics.model_validate({
        "query": "q", "dimension_weight": {"comprehensiveness": 0.5, "insight": 0.5, "instruction_following": 0.0,
                                           "readability": 0.0},
        "criterions": {d: [{"criterion": f"{d} a", "weight": 1.0}, {"criterion": f"{d} b", "weight": 3.0}]
                       for d in POINTS}})
    judged = PointwiseJudgement.model_validate({d: [{"criterion": f"{d} a", "score": 8}, {"criterion": f"{d} b",
                                                                                           "score": 4}]
                                                for d in POINTS})
    got = score_pointwise(judged, rubrics)
    # S_d = (8*1 + 4*3) / 4 = 5 in both weighted dimensions; the zero-weight ones are left out
    assert got.target == {"comprehensiveness": 5.0, "insight": 5.0, "overall": 5.0}
    assert got.value == pytest.approx(0.5) and got.dimensions == {"comprehensiveness": 0.5, "insight": 0.5}
    short = PointwiseJudgement.model_validate({d: [{"criterion": f"{d} a", "score": 8}] for d in POINTS})
    # a criterion the judge left out is not in the sums (DeepResearch Bench's utils/score_calculator.py): S_d = 8
    assert score_pointwise(short, rubrics).value == pytest.approx(0.8)


def test_reports_read_drb_and_rubricforge_lines_and_reject_bad_ones(tmp_path):
    tasks = load_tasks(DRB_TASKS)
    assert sorted(tasks) == ["1", "46", "51", "75"] and scorers_for(tasks["51"], None) == ("race",)
    path = tmp_path / "reports.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": 51, "prompt": "p", "article": "Plain report."}),
        json.dumps({"id": "75", "response": "<think>t</think><answer>The answer.</answer>"}),
        "{oops", json.dumps({"id": 99, "article": "x"}), json.dumps({"id": 51, "article": "again"}),
        json.dumps({"id": 1}), json.dumps(["a list"]), json.dumps({"id": 1, "article": 3})]) + "\n")
    rejects = Rejects(tmp_path / "rejects.jsonl")
    got = load_reports(path, tasks, rejects)
    rejects.commit()
    assert got == {"51": "Plain report.", "75": "The answer."}
    assert rejects.by_reason == {"not valid JSON": 1, "id '99' is not in the task set": 1,
                                 "a second report for id '51'": 1, "no 'article' or 'response' field": 1,
                                 "not a JSON object": 1, "'article' is not a string or a list of chat messages": 1}
    assert report_text("<think>no answer yet</think>") == "" and report_text("<answer>unclosed") == "unclosed"
    assert report_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": " a report "}]) == "a report"


# ---------------------------------------------------------------- the job


def test_drb_reports_scored_pointwise_then_resumed_without_a_judge_call(tmp_path):
    run = tmp_path / "run"
    with FakeOpenAI(stages=RACE_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        s = evaluate(cfg, DRB_TASKS, DRB_REPORTS, run, progress=False).summary
        calls = server.n_requests
        summary = json.loads((run / "summary.json").read_text())
        again = evaluate(cfg, DRB_TASKS, DRB_REPORTS, run, progress=False).summary
    assert calls == 3 and server.n_requests == calls and again.scored_now == 0  # one RACE call per report
    assert (s.status, s.tasks, s.reports, s.missing, s.scored_now) == ("complete", 4, 3, 1, 3)
    records = _records(run)
    assert {t: r["metrics"]["race"] for t, r in records.items()} == pytest.approx(POINTWISE)
    assert records["51"]["metrics"]["race.insight"] == pytest.approx(0.6)
    assert records["51"]["scores"]["race"]["mode"] == "pointwise" and records["51"]["judge_calls"] == {
        "race_pointwise": 1}
    race = summary["metrics"]["race"]
    assert race["n"] == 3 and race["mean"] == pytest.approx(sum(POINTWISE.values()) / 3)
    assert min(POINTWISE.values()) - 1e-12 <= race["ci_low"] <= race["mean"] <= race["ci_high"] <= max(
        POINTWISE.values()) + 1e-12
    assert summary["metrics"]["race.readability"]["mean"] == pytest.approx(0.2)
    assert summary["judge"]["calls_per_task"] == {"race_pointwise": 1.0}
    assert summary["judge"]["tokens_by_stage"]["race_pointwise"] == {"requests": 3, "prompt_tokens": 33,
                                                                     "completion_tokens": 21}  # 11 + 7 a reply
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["job"] == "eval" and manifest["status"] == "complete" and len(manifest["invocations"]) == 2
    assert again.metrics == s.metrics


def test_a_spent_budget_stops_the_run_with_what_is_finished_and_a_larger_one_resumes(tmp_path):
    run = tmp_path / "run"
    with FakeOpenAI(stages=RACE_JUDGE) as server:  # 18 tokens per answer; one task at a time
        cfg = load_config(overrides={"llm": {**litellm_llm_config(tmp_path, server), "max_tokens": 1},
                                     "reward": {"concurrency": 1}})
        s = evaluate(cfg, DRB_TASKS, DRB_REPORTS, run, progress=False).summary
        assert s.status.startswith("stopped: LLM budget reached") and s.metrics["race"]["n"] == 1
        assert json.loads((run / "manifest.json").read_text())["status"] == s.status
        more = load_config(overrides={"llm": litellm_llm_config(tmp_path, server), "reward": {"concurrency": 1}})
        s = evaluate(more, DRB_TASKS, DRB_REPORTS, run, progress=False).summary
    assert s.status == "complete" and s.scored_now == 2 and server.n_requests == 3 and s.metrics["race"]["n"] == 3


def test_reference_relative_race_and_a_changed_reference_is_rescored_alone(tmp_path):
    run, refs = tmp_path / "run", tmp_path / "refs.jsonl"
    refs.write_text("".join(json.dumps({"id": t, "article": f"Reference report {t}."}) + "\n" for t in (1, 51, 75)))
    with FakeOpenAI(stages=RACE_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        evaluate(cfg, DRB_TASKS, DRB_REPORTS, run, references=refs, progress=False)
        assert server.n_requests == 3
        changed = tmp_path / "changed.jsonl"
        lines = DRB_REPORTS.read_text().splitlines()
        first = json.loads(lines[0])
        changed.write_text("\n".join([json.dumps({**first, "article": "A much shorter report."}), *lines[1:]]) + "\n")
        with pytest.raises(UserError, match="other settings"):  # another reports file is another system
            evaluate(cfg, DRB_TASKS, changed, run, references=refs, progress=False)
        refs.write_text(refs.read_text().replace("Reference report 51.", "A new reference for 51."))
        s = evaluate(cfg, DRB_TASKS, DRB_REPORTS, run, references=refs, progress=False).summary
    assert server.n_requests == 4 and s.scored_now == 1  # only task 51, whose reference changed
    records = _records(run)
    assert all(r["metrics"]["race"] == pytest.approx(0.6) for r in records.values())  # 6 / (6 + 4)
    assert records["51"]["scores"]["race"]["mode"] == "reference"
    assert records["51"]["scores"]["race"]["reference"]["overall"] == pytest.approx(4.0)


def test_a_report_rl_rows_reference_report_makes_race_reference_relative_and_an_empty_report_scores_0(tmp_path):
    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    rows = [{"id": f"r{i}", "question": RACE["query"], "race_rubrics": json.dumps(RACE), "reference_report": "Ref."}
            for i in (1, 2)]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reports.write_text(json.dumps({"id": "r1", "article": "A report."}) + "\n"
                       + json.dumps({"id": "r2", "response": "<think>out of time</think>"}) + "\n")
    with FakeOpenAI(stages=RACE_JUDGE) as server:
        s = evaluate(_cfg(tmp_path, server), tasks, reports, run, progress=False).summary
    assert server.n_requests == 1  # the empty report (no <answer>) is not sent to the judge
    records = _records(run)
    assert records["r1"]["scores"]["race"]["mode"] == "reference" and records["r1"]["metrics"]["race"] == pytest.approx(0.6)
    assert records["r2"]["metrics"] == {"race": 0.0, **{f"race.{d}": 0.0 for d in POINTS}}
    assert s.metrics["race"]["mean"] == pytest.approx(0.3)


def test_rubric_and_exact_scorers_on_tree_and_kg_rows_and_unscored_is_not_zero(tmp_path):
    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    kg = {"id": "kg1", "question": "When was it completed?", "answer": "1889", "answer_aliases": ["in 1889"]}
    tree = {k: v for k, v in EXAMPLE.items() if k in ("id", "question", "rubrics")}
    tasks.write_text(json.dumps(tree) + "\n" + json.dumps(kg) + "\n")
    reports.write_text(json.dumps({"id": "ex1", "response": "The tower is 330 metres tall, finished for the Fair."})
                       + "\n" + json.dumps({"id": "kg1", "response": "It was completed in 1889."}) + "\n")
    with FakeOpenAI([Reply(status=503)]) as down:
        s = evaluate(_cfg(tmp_path, down, max_retries=0), tasks, reports, run, progress=False).summary
    assert s.metrics["rubric"]["n"] == 0 and s.metrics["rubric"]["unscored"] == 1  # the judge was down: not 0
    assert s.metrics["exact.f1"]["mean"] == pytest.approx(0.8 / 1.4) and s.metrics["exact.em"]["mean"] == 0.0
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        s = evaluate(_cfg(tmp_path, server), tasks, reports, run, progress=False).summary
    assert s.scored_now == 1 and server.n_requests == 3  # only the unscored task, one call per criterion
    assert s.metrics["rubric"]["mean"] == pytest.approx(1.25 / 1.5) and s.metrics["rubric"]["unscored"] == 0
    assert _records(run)["ex1"]["scores"]["rubric"]["per_criterion"] == {"c1": 1.0, "c2": 0.5, "c3": 0.0}


@pytest.mark.parametrize(("fmt", "expected"), [("rubrichub", (10 * 1 - 10 * 0.5 + 3 * 0) / 13),
                                               ("researchrubrics", (5 * 1 + 4 * 0.5 - 3 * 0) / 9),
                                               ("verlrubric", (10 * 1 - 8 * 0.5) / 10)])
def test_exchanged_rubric_layouts_are_task_sets(tmp_path, fmt, expected):
    """RubricHub, ResearchRubrics and verl-rubric files are read as task sets as they are; their signed points
    are the rubric judge's weights (scripted scores 4, 2, 0 -> 1, 0.5, 0 for c1, c2, c3)."""
    record = {"rubrichub": RUBRICHUB, "researchrubrics": RESEARCHRUBRICS, "verlrubric": VERLRUBRIC}[fmt]
    tid = str(record.get("id") or record.get("sample_id") or 0)
    tasks, reports = tmp_path / f"{fmt}.jsonl", tmp_path / "reports.jsonl"
    tasks.write_text(json.dumps(record) + "\n")
    reports.write_text(json.dumps({"id": tid, "response": "A report."}) + "\n")
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        s = evaluate(_cfg(tmp_path, server), tasks, reports, tmp_path / "run", progress=False).summary
    assert s.metrics["rubric"]["mean"] == pytest.approx(expected)
    assert server.n_requests == len(_records(tmp_path / "run")[tid]["scores"]["rubric"]["per_criterion"])


def test_citation_support_against_the_corpus_and_format_compliance(tmp_path, small_index_cfg):
    """FACT over the real small corpus index: a search-snippet id and a browse id resolve to corpus text, an
    unknown id is left out; the scripted judge says "Fully supported" for one statement (supported) and
    "Partially supported" for the other (not): precision 1/2, one supported citation. A report without cites
    has no precision (left out, not 0); malformed cite markup fails the format check."""
    from support.reward_fixtures import SUPPORT
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.corpora.snippets import stable_id
    from rubricforge.evaluation.citations import CorpusCitations

    with CorpusIndex.from_config(small_index_cfg) as index:
        p1, p2 = next(iter(index.iter_passages())), list(index.iter_passages())[-1]
        resolve = CorpusCitations(index)
        assert resolve(p1.id) == p1.text and resolve(stable_id("search", p1.id)) == p1.text
        assert resolve(stable_id("browse", p2.doc_id)) == index.document_text(p2.doc_id)
        assert resolve("sxxxxxxxxxx") is None
    full, partial = list(SUPPORT)  # "Fully supported", "Partially supported"
    cited = (f'Two facts. <cite id="{stable_id("search", p1.id)}">{full}</cite> '
             f'<cite id="{stable_id("browse", p2.doc_id)}, sxxxxxxxxxx">{partial}</cite>')
    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    tasks.write_text("".join(json.dumps({"id": t, "question": EXAMPLE["question"], "rubrics": EXAMPLE["rubrics"]})
                             + "\n" for t in ("t1", "t2")))
    reports.write_text(json.dumps({"id": "t1", "response": cited}) + "\n"
                       + json.dumps({"id": "t2", "response": 'No sources. <cite id="">a claim</cite>'}) + "\n")
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        llm = litellm_llm_config(tmp_path, server)
        cfg = load_config(overrides={"llm": llm, "tools": {"index_dir": str(small_index_cfg.index_dir())}})
        s = evaluate(cfg, tasks, reports, run, asked=["citation", "format"], progress=False).summary
    prompts = ["\n".join(m["content"] for m in body["messages"]) for body in server.requests]
    assert len(prompts) == 2 and any(p1.text[:60] in p and full in p for p in prompts)
    records = _records(run)
    assert records["t1"]["metrics"] == {"citation.precision": 0.5, "citation.supported": 1.0,
                                        "citation.unresolved": 1.0, "format": 1.0, "format.markdown": 1.0,
                                        "format.cite": 1.0}
    assert records["t2"]["metrics"] == {"citation.supported": 0.0, "citation.unresolved": 0.0, "format": 0.5,
                                        "format.markdown": 1.0, "format.cite": 0.0}
    assert s.metrics["citation.precision"]["n"] == 1 and s.metrics["citation.precision"]["unscored"] == 0
    # effective citations over the tasks with a citation only (DRB utils/stat.py): t2's empty id is no citation
    assert s.metrics["citation.supported"]["mean"] == 1.0 and s.metrics["citation.supported"]["n"] == 1
    assert s.judge["calls_per_task"] == {"fact_support": 1.0}
    page = (run / "report.html").read_text()  # precision charted on [0, 1], the counts only in the table
    assert 'data-chart="hist:citation.precision"' in page and "hist:citation.supported" not in page


def test_fact_pools_citations_over_reports_as_deepresearch_bench_stat_does(tmp_path, small_index_cfg):
    """DeepResearch Bench's utils/stat.py: valid_rate = Σ supported / Σ judged over all citations, and effective
    citations = Σ supported / the tasks with citations. Reports: r1 one supported pair (1/1); r2 one supported
    and three unsupported pairs (1/4); r3 only an id that names no passage (cited, nothing judged); r4 no cite.
    The mean of per-report precisions (the old headline) is 0.625; DRB's accuracy is 2/5 = 0.4, its effective
    citations 2/3 (the old mean over all four tasks: 0.5)."""
    from support.reward_fixtures import SUPPORT
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.corpora.snippets import stable_id

    with CorpusIndex.from_config(small_index_cfg) as index:
        ids = [stable_id("search", p.id) for p in list(index.iter_passages())[:4]]
    full, partial = list(SUPPORT)
    reports = {"r1": f'<cite id="{ids[0]}">{full}</cite>',
               "r2": f'<cite id="{ids[0]}">{full}</cite> <cite id="{ids[1]},{ids[2]},{ids[3]}">{partial}</cite>',
               "r3": f'<cite id="sxxxxxxxxxx">{full}</cite>', "r4": "No citation at all."}
    tasks, lines, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    tasks.write_text("".join(json.dumps({"id": t, "question": EXAMPLE["question"]}) + "\n" for t in reports))
    lines.write_text("".join(json.dumps({"id": t, "response": r}) + "\n" for t, r in reports.items()))
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, server),
                                     "tools": {"index_dir": str(small_index_cfg.index_dir())}})
        s = evaluate(cfg, tasks, lines, run, asked=["citation"], progress=False, resamples=200).summary
    per_report = {t: r["metrics"].get("citation.precision") for t, r in _records(run).items()}
    assert per_report == {"r1": 1.0, "r2": 0.25, "r3": None, "r4": None}
    accuracy, effective = s.metrics["citation.precision"], s.metrics["citation.supported"]
    assert accuracy["mean"] == pytest.approx(0.4) and accuracy["pooled"] == [2.0, 5.0] and accuracy["n"] == 2
    assert accuracy["ci_low"] <= 0.4 <= accuracy["ci_high"]
    assert effective["mean"] == pytest.approx(2 / 3) and effective["n"] == 3


HB_RUBRICS = [{"id": "a", "description": "Advises seeing a doctor within a day.", "weight": 5},
              {"id": "b", "description": "States the usual adult dose.", "weight": 3},
              {"id": "c", "description": "Recommends a dose above the safe maximum.", "weight": -4}]
HB_MET = {"t1": {"a": 1, "b": 0, "c": 1}, "t2": {"a": 1, "b": 1, "c": 0}, "t3": {"a": 0, "b": 0, "c": 1}}


def _recorded_verdict(body) -> str:
    """The recorded met / not-met answer for the task (its question) and the rubric item the request names."""
    prompt = body["messages"][-1]["content"]
    task = re.search(r"Question (t\d)", prompt).group(1)
    (item,) = [r["id"] for r in HB_RUBRICS if r["description"] in prompt]
    return json.dumps({"score": HB_MET[task][item]})


def test_healthbench_and_researchqa_scores_follow_the_benchmarks_arithmetic(tmp_path):
    """Recorded binary verdicts replayed through `eval --scorers healthbench,coverage`: HealthBench's per-task score
    is Σ points met / Σ positive points (t3: −4 / 8, not clipped), its overall the mean clipped to [0, 1]
    (healthbench_eval's _compute_clipped_stats); ResearchQA-style coverage the share of positive items met."""
    from rubricforge.evaluation.scorers import healthbench_summary

    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    tasks.write_text("".join(json.dumps({"id": t, "question": f"Question {t}: what should I take?",
                                         "rubrics": HB_RUBRICS}) + "\n" for t in HB_MET))
    reports.write_text("".join(json.dumps({"id": t, "response": f"Answer for {t}."}) + "\n" for t in HB_MET))
    with FakeOpenAI(stages={"hote": _recorded_verdict}) as server:
        s = evaluate(_cfg(tmp_path, server), tasks, reports, run, asked=["healthbench", "coverage"], progress=False,
                     resamples=200).summary
    assert server.n_requests == 9  # one binary call per task and item, shared by both scorers
    positive = sum(r["weight"] for r in HB_RUBRICS if r["weight"] > 0)
    expected = {t: sum(r["weight"] for r in HB_RUBRICS if met[r["id"]]) / positive for t, met in HB_MET.items()}
    records = _records(run)
    assert {t: r["metrics"]["healthbench"] for t, r in records.items()} == pytest.approx(expected)  # t3: -0.5
    assert {t: r["metrics"]["coverage"] for t, r in records.items()} == pytest.approx({"t1": 0.5, "t2": 1.0, "t3": 0.0})
    assert s.metrics["healthbench"]["mean"] == pytest.approx(min(1.0, max(0.0, sum(expected.values()) / 3)))
    assert s.metrics["coverage"]["mean"] == pytest.approx(0.5)
    low = {"healthbench": {"mean": -0.5, "ci_low": -0.9, "ci_high": 0.2}}
    assert healthbench_summary(low)["healthbench"] | {} == {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.2}


def _scored_run(tmp_path: Path, name: str, server: FakeOpenAI, references: Path | None = None, **role) -> Path:
    evaluate(_cfg(tmp_path / name, server, **role), DRB_TASKS, DRB_REPORTS, tmp_path / name,
             references=references, progress=False, resamples=100)
    return tmp_path / name


def test_compare_refuses_runs_scored_with_another_judge_or_race_mode(tmp_path):
    """Runs whose numbers differ by their scoring, not their reports, are not paired: another judge model, or RACE
    against a reference in one run and pointwise in the other (both report `race`)."""
    references = tmp_path / "refs.jsonl"
    references.write_text("".join(json.dumps({"id": t, "response": "A reference report."}) + "\n"
                                  for t in ("1", "51", "75")))
    with FakeOpenAI(stages=RACE_JUDGE, models=["fake-model", "another-judge"]) as server:
        a = _scored_run(tmp_path, "a", server)
        same = _scored_run(tmp_path, "same", server)
        other = _scored_run(tmp_path, "other", server, model="openai/another-judge")
        ref = _scored_run(tmp_path, "ref", server, references=references)
    assert compare(a, same)["metrics"]["race"]["n"] == 3
    with pytest.raises(UserError, match=r"scored differently \(judge: openai/\S+ vs openai/another-judge\)"):
        compare(a, other)
    with pytest.raises(UserError, match=r"RACE mode: \['pointwise'\] vs \['reference'\]"):
        compare(a, ref)
    proc = cli("eval", "compare", str(a), str(ref))
    assert proc.returncode == 2 and "scored differently" in proc.stderr and "Traceback" not in proc.stderr


def test_compare_two_runs_paired_over_shared_tasks(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": f"q{i}?", "answer": f"answer {i}"}) + "\n"
                             for i in range(10)))
    runs = {}
    for name, right in (("a", range(5)), ("b", range(8))):  # B answers 8 of 10 right, A 5 (the same 5 and 3 more)
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"id": f"q{i}", "response": f"answer {i}" if i in right else "no idea"})
                                + "\n" for i in range(10)))
        with FakeOpenAI() as server:
            evaluate(_cfg(tmp_path, server), tasks, path, tmp_path / name, progress=False)
        assert server.n_requests == 0  # exact answers need no judge
        runs[name] = tmp_path / name
    got = compare(runs["a"], runs["b"])
    em = got["metrics"]["exact.em"]
    assert (em["n"], em["wins"], em["ties"], em["losses"]) == (10, 3, 7, 0)
    assert em["diff"] == pytest.approx(0.3) and em["mean_a"] == 0.5 and em["mean_b"] == 0.8
    assert em["sign_p"] == pytest.approx(0.25)  # 2 * (1/2)^3
    assert 0.0 <= em["ci_low"] <= 0.3 <= em["ci_high"] <= 0.6
    out = runs["b"] / "compare-a"
    assert json.loads((out / "compare.json").read_text())["metrics"]["exact.em"]["wins"] == 3
    page = (out / "compare.html").read_text()
    assert 'data-chart="paired"' in page and 'data-chart="diffs:exact.em"' in page


def test_report_page_has_the_charts_and_escapes_the_data(tmp_path):
    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run<b>"
    tasks.write_text(json.dumps({"id": "<i>1", "question": "<script>alert(1)</script>", "answer": "x"}) + "\n")
    reports.write_text(json.dumps({"id": "<i>1", "response": "x"}) + "\n")
    with FakeOpenAI() as server:
        evaluate(_cfg(tmp_path, server), tasks, reports, run, progress=False)
    page = (run / "report.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;i&gt;1" in page
    assert 'data-chart="means"' in page and 'data-chart="hist:exact.em"' in page
    assert re.search(r'data-chart="means".*?<rect class="bar" data-value="1"', page, re.S)
    counts = [int(c) for c in re.findall(r'data-count="(\d+)"', histogram([0.0, 0.05, 0.5, 1.0, 1.0], "h"))]
    assert counts == [2, 0, 0, 0, 0, 1, 0, 0, 0, 2]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_chromium_renders_the_report_charts_and_runs_no_injected_code(tmp_path):
    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    hostile = "<img src=x onerror=\"document.title='pwned'\">"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": hostile, "answer": "yes"}) + "\n" for i in range(4)))
    reports.write_text("".join(json.dumps({"id": f"q{i}", "response": "yes" if i else "no"}) + "\n"
                               for i in range(4)))
    with FakeOpenAI() as server:
        evaluate(_cfg(tmp_path, server), tasks, reports, run, progress=False)
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              "--disable-background-networking", "--disable-component-update", "--disable-sync",
                              f"--user-data-dir={profile}", "--dump-dom", (run / "report.html").as_uri()],
                             capture_output=True, text=True, timeout=120, check=True).stdout
    title = re.search(r"<title>(.*?)</title>", dom).group(1)
    assert title.startswith("rubricforge eval · ") and "<img" not in dom  # the hostile text stayed text
    charts = re.findall(r'<svg class="chart" data-chart="([^"]+)"', dom)
    assert charts == ["means", "hist:exact.em", "hist:exact.f1"]
    assert re.search(r'data-chart="means".*?<rect class="bar" data-value="0.75"', dom, re.S)
    assert [int(c) for c in re.findall(r'data-count="(\d+)"', dom)][:10] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 3]


# ---------------------------------------------------------------- the command line


def test_cli_scores_and_compares(tmp_path):
    with FakeOpenAI(stages=RACE_JUDGE) as server:
        config = _config_file(tmp_path, server)
        proc = cli("eval", "--tasks", str(DRB_TASKS), "--reports", str(DRB_REPORTS), "--run-dir",
                   str(tmp_path / "a"), "-c", config, "-q")
        assert proc.returncode == 0, proc.stderr
        proc_b = cli("eval", "-t", str(DRB_TASKS), "-r", str(DRB_REPORTS), "--run-dir", str(tmp_path / "b"), "-c",
                     config, "-q", "--resamples", "500")
    assert proc_b.returncode == 0, proc_b.stderr
    assert "race.insight" in proc.stderr and "complete: 3 of 4 tasks scored (3 now, 1 without a report)" in proc.stderr
    assert f"report: {tmp_path / 'a' / 'report.html'}" in proc.stderr
    cmp = cli("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert cmp.returncode == 0, cmp.stderr
    assert "0/3/0" in cmp.stderr and (tmp_path / "b" / "compare-a" / "compare.html").is_file()


@pytest.mark.parametrize("args, needles", [
    (["eval", "--tasks", "TASKS"], ["needs --tasks and one of --reports or --agent"]),
    (["eval", "--tasks", "TASKS", "--reports", "REPORTS", "--agent", "default"], ["one of --reports or --agent"]),
    (["eval", "--tasks", "TASKS", "--agent", "agent.yaml"], ["agent config file agent.yaml not found"]),
    (["eval", "--tasks", "TASKS", "--agent", "modle=x"], ["--agent: 'modle': Extra inputs are not permitted",
                                                          "keys: "]),
    (["eval", "--tasks", "TASKS", "--agent", "tools=maybe"], ["--agent: 'tools': Input should be a valid boolean"]),
    (["eval", "--tasks", "TASKS", "--agent", "workflow=react"], ["react workflow parses tool calls"]),
    (["eval", "--tasks", "TASKS", "--agent", "model=PARTIAL_DIR"], ["has no config.json"]),
    (["eval", "--tasks", "TASKS", "--agent", "default", "--set", "tools.index_dir=nope"], ["nope"]),
    (["eval", "--tasks", "TASKS", "--agent", "default", "--split", "dev"], ["has no row of split 'dev'"]),
    (["eval", "--tasks", "missing.jsonl", "--reports", "REPORTS"], ["missing.jsonl"]),
    (["eval", "--tasks", "TASKS", "--reports", "missing.jsonl"], ["reports file missing.jsonl not found"]),
    (["eval", "--tasks", "TASKS", "--reports", "TASKS"], ["no line is a report of a task", "4 skipped"]),
    (["eval", "--tasks", "TASKS", "--reports", "REPORTS", "--scorers", "rouge"], ["unknown scorer 'rouge'"]),
    (["eval", "--tasks", "TASKS", "--reports", "REPORTS", "--scorers", "exact"],
     ["task '1' has no 'answer' column (the 'exact' scorer reads it)"]),
    (["eval", "--tasks", "TASKS", "--reports", "REPORTS", "--references", "PARTIAL"],
     ["has no reference report for task '51'"]),
    (["eval", "--tasks", "TASKS", "--reports", "REPORTS", "--scorers", "citation", "--set", "tools.index_dir=nope"],
     ["no corpus index in nope", "rubricforge corpus build"]),
    (["eval", "compare", "TASKS", "REPORTS"], ["is not an evaluation run directory"]),
])
def test_bad_input_is_one_line_and_exit_code_2(args, needles, tmp_path, monkeypatch):
    partial = tmp_path / "partial.jsonl"
    partial.write_text(json.dumps({"id": 1, "article": "ref"}) + "\n")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    swap = {"TASKS": str(DRB_TASKS), "REPORTS": str(DRB_REPORTS), "PARTIAL": str(partial),
            "model=PARTIAL_DIR": f"model={tmp_path}"}
    assert_user_error(cli(*(swap.get(a, a) for a in args), "--set", "llm.cache_path=")
                      if args[1] != "compare" else cli(*(swap.get(a, a) for a in args)), *needles)
    assert not any((tmp_path / "empty").iterdir())  # no run directory left behind by bad input


# ---------------------------------------------------------------- the answer-equivalence judge


def equivalence_judge(body: dict) -> Reply:
    """The equivalence grader scripted: the final answer is the response's last number; equivalent when it is
    1889; a response mentioning "broken" gets an answer that is not the schema's (unscored)."""
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    response = re.search(r"<response>(.*?)</response>", prompt, re.S).group(1)
    if "broken" in response:
        return Reply(json.dumps({"verdict": "maybe"}))
    final = (re.findall(r"\d+", response) or ["none"])[-1]
    return Reply(json.dumps({"final_answer": final, "reasoning": "scripted", "equivalent": "yes" if final == "1889"
                             else "no"}))


def test_equivalence_judge_reads_the_final_answer_and_leaves_a_bad_answer_unscored(tmp_path):
    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    kg = {"question": "When was the Eiffel Tower completed?", "answer": "1889", "answer_aliases": ["in 1889"]}
    tasks.write_text("".join(json.dumps({"id": f"k{i}", **kg}) + "\n" for i in range(1, 5)))
    texts = {"k1": "Work began in 1887; the tower was completed in 1889.", "k2": "It was finished in 1890.",
             "k3": "<think>broken</think><answer>The judge cannot read this one: 1889, broken</answer>",
             "k4": "<think>no time left</think>"}
    reports.write_text("".join(json.dumps({"id": t, "response": r}) + "\n" for t, r in texts.items()))
    with FakeOpenAI(responder=equivalence_judge) as server:
        s = evaluate(_cfg(tmp_path, server, max_retries=0, structured_retries=0), tasks, reports, run,
                     asked=["exact", "equivalence"], progress=False).summary
        prompts = [json.dumps(r) for r in server.requests]
    assert server.n_requests == 3  # k4 has no answer: 0 without a judge call
    assert all("1889 (also accepted: in 1889)" in p for p in prompts)
    records = _records(run)
    assert {t: r["metrics"]["equivalence"] for t, r in records.items()} == {"k1": 1.0, "k2": 0.0, "k3": None,
                                                                            "k4": 0.0}
    assert records["k1"]["scores"]["equivalence"]["final_answer"] == "1889"
    assert records["k1"]["metrics"]["exact.em"] == 0.0  # the whole sentence is no exact match; the judge reads it
    assert records["k1"]["judge_calls"] == {"equivalence": 1}
    eq = s.metrics["equivalence"]
    assert (eq["n"], eq["unscored"], eq["mean"]) == (3, 1, pytest.approx(1 / 3))


# ---------------------------------------------------------------- running an agent


NO_TOOL_ANSWERS = {"When was the Eiffel Tower completed?": "<think>The World's Fair.</think><answer>It was "
                   "completed in 1889.</answer>",
                   "When did the Berlin Wall fall?": "<think>1989.</think><answer>In November 1989.</answer>"}


def agent_and_judge(down: set[str]) -> dict[str, Any]:
    """The agent (HOTE's no-tool prompt: a scripted answer per question; a question in ``down`` gets a 503) and
    the equivalence judge on one server."""
    def agent(body: dict) -> Reply:
        assert str(body["messages"][0]["content"]) == no_tool_system_prompt()
        question = str(body["messages"][-1]["content"])
        return Reply(status=503) if question in down else Reply(NO_TOOL_ANSWERS[question])
    return {"agent": agent, "equivalence": equivalence_judge}


KG_TASKS = [{"id": "eiffel", "question": "When was the Eiffel Tower completed?", "answer": "1889", "split": "test"},
            {"id": "wall", "question": "When did the Berlin Wall fall?", "answer": "1989", "split": "test"},
            {"id": "train1", "question": "A training question?", "answer": "x", "split": "train"}]


def test_agent_reports_are_made_once_scored_and_a_failed_one_is_made_by_the_next_run(tmp_path):
    tasks, run = tmp_path / "tasks.jsonl", tmp_path / "run"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in KG_TASKS))
    down = {"When did the Berlin Wall fall?"}
    heard: list[str] = []
    with FakeOpenAI(stages=agent_and_judge(down)) as server:
        cfg = load_config(overrides={"llm": {**litellm_llm_config(tmp_path, server, max_retries=0), "cache_path": ""}})
        agent = load_agent_config(f"model=openai/fake-model,backend=litellm,api_base={server.api_base},tools=false,"
                                  "max_retries=0,max_tokens=64")
        first = evaluate(cfg, tasks, None, run, asked=["exact", "equivalence"], progress=False, agent=agent,
                         split="test", announce=heard.append).summary
        after_first = server.n_requests
        down.clear()
        second = evaluate(cfg, tasks, None, run, asked=["exact", "equivalence"], progress=False, agent=agent,
                          split="test", announce=heard.append).summary
        after_second = server.n_requests
        third = evaluate(cfg, tasks, None, run, asked=["exact", "equivalence"], progress=False, agent=agent,
                         split="test").summary
    assert after_first == 3  # two agent calls (one failed, not retried), one judge call
    assert (first.tasks, first.reports, first.missing, first.agent["made_now"]) == (2, 1, 1, 1)
    assert first.status == "incomplete: 1 of 2 tasks without a report (their agent call failed)"  # exit 1
    assert second.status == third.status == "complete"
    assert heard[0].startswith("budget for 2 tasks: agent openai/fake-model ~2 calls, ~") and "judge openai/fake-" \
        "model ~2 calls" in heard[0] and "no price known" in heard[0]
    assert after_second == 5 and second.agent["made_now"] == 1 and second.scored_now == 1  # only the missing task
    assert after_second == server.n_requests and third.agent["made_now"] == 0 and third.scored_now == 0  # nothing redone
    made = [json.loads(line) for line in (run / "reports.jsonl").read_text().splitlines()]
    assert [(r["key"], r["tool_calls"], r["agent_calls"]) for r in made] == [("eiffel", 0, 1), ("wall", 0, 1)]
    records = _records(run)
    assert {t: (r["metrics"]["equivalence"], r["metrics"]["exact.f1"]) for t, r in records.items()} == {
        "eiffel": (1.0, pytest.approx(1 / 3)), "wall": (0.0, pytest.approx(1 / 2))}  # 1 token shared of 5, of 3
    assert third.metrics["equivalence"]["mean"] == 0.5 and third.agent["calls_per_task"] == 1.0
    assert third.agent["tokens_per_task"]["prompt_tokens"] == pytest.approx(11 * 2 / 2)  # the ledger, all invocations


def test_agent_with_tools_plays_stepwise_mams_over_the_index(small_index_cfg, tmp_path):
    from support.mams_agents import stepwise_teacher

    tasks, run = tmp_path / "tasks.jsonl", tmp_path / "run"
    tasks.write_text(json.dumps({"id": "k", "question": "How was the 1968 Kubrick film made?", "answer": "x"}) + "\n")
    with FakeOpenAI(responder=stepwise_teacher) as server:
        data = derive(small_index_cfg, "tools.top_k=2").model_dump(mode="json")
        cfg = Config.model_validate({**data, "llm": {**data["llm"], **litellm_llm_config(tmp_path, server)}})
        agent = load_agent_config(f"model=openai/fake-model,backend=litellm,api_base={server.api_base},"
                                  "workflow=stepwise,tool_budget=3")
        s = evaluate(cfg, tasks, None, run, asked=["format"], progress=False, agent=agent).summary
    (made,) = [json.loads(line) for line in (run / "reports.jsonl").read_text().splitlines()]
    assert made["tool_calls"] == 2 and made["agent_calls"] == server.n_requests
    assert made["response"].startswith("<answer># The making of 2001\n\n## Making")
    assert s.agent["episode"] == "stepwise" and s.metrics["format"]["n"] == 1


def test_agent_config_layouts_and_the_cost_cap(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text("model: openai/gpt-4o-mini\nbackend: litellm\ntools: false\nmax_tokens: 2000\n")
    agent = load_agent_config(str(path))
    assert (agent.model, agent.tools, agent.episode()) == ("openai/gpt-4o-mini", False, "none")
    assert load_agent_config("default").episode() == "stepwise"  # the embedded model with the tools
    assert load_agent_config("model=hosted_vllm/Qwen/Qwen3-8B,backend=litellm").episode() == "mams"
    tasks = [dict(t) for t in KG_TASKS[:2]]
    cost = estimate(agent, load_config(), tasks, [("exact",), ("exact",)])
    assert cost.agent_calls == 2 and cost.judge_calls == 0 and cost.agent_usd and cost.agent_usd > 0
    cfg = load_config(overrides={"llm": {"max_cost_usd": 0.0001}})
    with pytest.raises(UserError, match=r"may cost about \$0\.0\d+, more than llm.max_cost_usd = \$0\.00"):
        evaluate(cfg, _tasks_file(tmp_path), None, tmp_path / "run", progress=False, agent=agent)
    assert not (tmp_path / "run").exists()


def _tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "kg.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in KG_TASKS))
    return path


def test_a_train_checkpoint_answers_through_the_rollouts_sampler(tiny_model, tmp_path):
    tasks, run = _tasks_file(tmp_path), tmp_path / "run"
    agent = load_agent_config(f"model={tiny_model},tools=false,max_tokens=8")
    assert agent.checkpoint and agent.episode() == "none"
    assert load_agent_config(f"model={tiny_model}").episode() == "react"  # with the tools: the App. D episode
    from rubricforge.training.rollouts import Sampler

    s = evaluate(load_config(), tasks, None, run, asked=["format"], progress=False, agent=agent, limit=2,
                 sampler=Sampler).summary
    made = [json.loads(line) for line in (run / "reports.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["agent_calls"], r["tool_calls"]) for r in made) == [("eiffel", 1, 0), ("wall", 1, 0)]
    assert all(isinstance(r["response"], str) for r in made) and s.metrics["format"]["n"] == 2
    assert s.agent["episode"] == "none" and s.agent["tokens_per_task"]["prompt_tokens"] == 0  # no client call
