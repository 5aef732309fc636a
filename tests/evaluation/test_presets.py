"""`rubricforge eval --preset drb | drb2`: recorded judge answers replayed through each leaderboard's evaluator, the
aggregate checked against the benchmark's own arithmetic worked out here from the same answers; the "not comparable
with the leaderboard" label; a preset under explicit settings; an unknown preset."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from rubricforge.config import load_config
from rubricforge.evaluation.drb2 import task_scores
from rubricforge.evaluation.presets import NOT_COMPARABLE, apply, label
from rubricforge.jobs.evaluate import compare, evaluate
from rubricforge.rewards.judging import PROMPTS
from rubricforge.testing import FakeOpenAI
from support.cli import assert_user_error, cli
from support.llm_fakes import litellm_llm_config
from support.paths import DATA

DRB_TASKS = DATA / "formats" / "drb_criteria.jsonl"  # tasks 1 (zh), 46, 51, 75 (en)
DRB_REPORTS = DATA / "eval" / "drb_claude-3-7-sonnet-latest.jsonl"  # reports of tasks 1, 51, 75
DRB_ANSWERS = DATA / "eval" / "drb_race_judge_answers.jsonl"  # one recorded RACE answer per task
DRB2_TASKS, DRB2_REPORTS = DATA / "eval" / "drb2_tasks.jsonl", DATA / "eval" / "drb2_reports.jsonl"
DRB2_ANSWERS = DATA / "eval" / "drb2_judge_answers.jsonl"  # one recorded answer per judge call (50 items a call)
DIMS = ("comprehensiveness", "insight", "instruction_following", "readability")
MODELS = ["gpt-5.5", "gpt-5.4-mini", "fake-model"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _prompt(body: dict) -> str:
    return "\n".join(str(m.get("content", "")) for m in body["messages"])


def _sent(body: dict) -> dict:
    return json.loads(re.search(r"<task_and_rubric>\n(.*)\n</task_and_rubric>", _prompt(body), re.S).group(1))


def _drb2_answer(body: dict) -> str:
    """The recorded verdicts of the rubric items the request names, in its order (the recording holds one answer per
    call of 50 items)."""
    recorded = {r["rubric_item"]: r for a in _lines(DRB2_ANSWERS) for r in a["answer"]["results"]}
    return json.dumps({"results": [recorded[i] for i in _sent(body)["rubric_items"]]}, ensure_ascii=False)


def _race_answer(body: dict) -> str:
    """The recorded RACE answer of the task whose query the request holds."""
    queries = {str(t["id"]): t["prompt"] for t in _lines(DRB_TASKS)}
    prompt = _prompt(body)
    (tid,) = [t for t, q in queries.items() if f'"{q}"' in prompt]
    return json.dumps(next(a["answer"] for a in _lines(DRB_ANSWERS) if a["id"] == tid), ensure_ascii=False)


def _llm(tmp_path: Path, server: FakeOpenAI, judge: str | None) -> dict:
    """Every role reaches ``server``; the judge's model and sampling are left to the preset unless ``judge`` names
    a model (explicit)."""
    llm = litellm_llm_config(tmp_path, server)
    llm["judge"] = {k: v for k, v in llm["judge"].items() if k != "model"} | ({"model": judge} if judge else {})
    return llm


def _cfg(tmp_path, server, preset: str | None, judge: str | None = "openai/gpt-5.5", **eval_settings):
    return load_config(overrides={"llm": _llm(tmp_path, server, judge),
                                  "eval": {**({"preset": preset} if preset else {}), **eval_settings}})


def _records(run: Path) -> dict[str, dict]:
    return {r["key"]: r for r in map(json.loads, (run / "tasks.jsonl").read_text().splitlines())}


# ---------------------------------------------------------------- DeepResearch Bench II


def test_drb2_preset_replays_recorded_answers_to_the_benchmarks_aggregate(tmp_path):
    """DeepResearch Bench II, aggregate_scores.py's compute_dimension_averages: per task and dimension the share of
    items scored 1; the task's total the items scored 1 over all its items, its blocked_rate the items scored −1
    over all its items (−1 is no negative point); a model's number the mean over tasks. run_evaluation.py: items in
    the order info_recall, analysis, presentation, CHUNK_SIZE 50 a call (task t1's 52 items: 2 calls), the prompt
    as one user message, gpt_client.py's gpt-5.5 with 32,768 completion tokens and reasoning effort medium."""
    run = tmp_path / "run"
    with FakeOpenAI(stages={"drb2": _drb2_answer}, models=MODELS) as server:
        s = evaluate(_cfg(tmp_path, server, "drb2"), DRB2_TASKS, DRB2_REPORTS, run, progress=False, resamples=200).summary
    assert server.n_requests == 3
    for body in server.requests:
        assert [m["role"] for m in body["messages"]] == ["user"] and body["model"] == "gpt-5.5"
        assert body.get("max_completion_tokens", body.get("max_tokens")) == 32768
        assert body["reasoning_effort"] == "medium"  # gpt_client.py's reasoning_effort
        assert body["messages"][0]["content"].startswith("You will receive an article, a task, and a list of grading")
    assert sorted(len(_sent(b)["rubric_items"]) for b in server.requests) == [2, 5, 50]

    # the benchmark's arithmetic on the recorded answers, worked out here
    tasks = {t["id"]: t["content"]["rubric"] for t in _lines(DRB2_TASKS)}
    score = {a["task"]: {} for a in _lines(DRB2_ANSWERS)}
    for a in _lines(DRB2_ANSWERS):
        score[a["task"]].update({r["rubric_item"]: r["score"] for r in a["answer"]["results"]})
    expected = {}
    for tid, rubric in tasks.items():
        dims = {d: [score[tid][i] for i in items] for d, items in rubric.items() if items}
        every = [v for vs in dims.values() for v in vs]
        expected[tid] = {"drb2": every.count(1) / len(every), "drb2.blocked": every.count(-1) / len(every),
                         **{f"drb2.{d}": vs.count(1) / len(vs) for d, vs in dims.items()}}
    records = _records(run)
    for tid, want in expected.items():
        assert records[tid]["metrics"] == pytest.approx(want)
    assert "drb2.presentation" not in records["t2"]["metrics"]  # t2 has no presentation item: no metric, not 0
    assert expected["t1"]["drb2"] == pytest.approx(21 / 52) and expected["t2"]["drb2"] == pytest.approx(3 / 5)
    for metric in ("drb2", "drb2.blocked", "drb2.info_recall", "drb2.analysis"):
        assert s.metrics[metric]["mean"] == pytest.approx((expected["t1"][metric] + expected["t2"][metric]) / 2)
    assert s.leaderboard == {"preset": "drb2", "leaderboard": "DeepResearch Bench II (binary rubrics, GPT-5.5)",
                             "comparable": True, "why": []}
    assert NOT_COMPARABLE not in "\n".join(s.lines())


def test_drb2_scores_are_shares_of_ones_and_an_empty_report_costs_no_call(tmp_path):
    rubric = {"info_recall": ["a", "b", "c", "d"], "analysis": ["e"], "presentation": []}
    got = task_scores({"a": 1, "b": -1, "c": 0, "d": 1, "e": -1}, rubric)
    assert got == pytest.approx({"drb2": 2 / 5, "drb2.info_recall": 2 / 4, "drb2.analysis": 0.0, "drb2.blocked": 2 / 5})
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps({"id": "t2", "article": ""}) + "\n")
    with FakeOpenAI(models=MODELS) as server:
        s = evaluate(_cfg(tmp_path, server, "drb2"), DRB2_TASKS, reports, tmp_path / "run", progress=False).summary
    assert server.n_requests == 0 and s.metrics["drb2"]["mean"] == 0.0 and s.metrics["drb2.blocked"]["mean"] == 0.0


def test_a_drb2_answer_that_leaves_an_item_out_is_resampled(tmp_path):
    """run_evaluation.py's validate_batch_result: every item of the call, named exactly, or the call is asked again."""
    first = []

    def short_then_full(body):
        full = json.loads(_drb2_answer(body))
        if not first:
            first.append(1)
            return json.dumps({"results": full["results"][:-1]}, ensure_ascii=False)
        return json.dumps(full, ensure_ascii=False)

    reports = tmp_path / "reports.jsonl"
    reports.write_text(DRB2_REPORTS.read_text(encoding="utf-8").splitlines()[1] + "\n")  # t2: one call
    with FakeOpenAI(stages={"drb2": short_then_full}, models=MODELS) as server:
        s = evaluate(_cfg(tmp_path, server, "drb2"), DRB2_TASKS, reports, tmp_path / "run", progress=False).summary
    assert server.n_requests == 2 and "missing" in _prompt(server.requests[1])
    assert s.metrics["drb2"]["mean"] == pytest.approx(3 / 5)


# ---------------------------------------------------------------- DeepResearch Bench (RACE)


def _references(tmp_path: Path) -> Path:
    refs = tmp_path / "reference.jsonl"
    refs.write_text("".join(json.dumps({"id": t, "article": f"Reference article {t}."}) + "\n" for t in (1, 51, 75)))
    return refs


def test_drb_preset_replays_recorded_race_answers_to_drbs_arithmetic(tmp_path):
    """DeepResearch Bench, deepresearch_bench_race.py + utils/score_calculator.py: DRB's own scoring prompt (Chinese
    for a Chinese task, as one user message), the judged items weighted by the criterion each names (exact text,
    else ignoring case), S_d = Σ w·s / Σ w, S = Σ W_d·S_d / Σ W_d for target and reference, overall
    S(target) / (S(target) + S(reference)), run mean over tasks."""
    run = tmp_path / "run"
    with FakeOpenAI(stages={"race": _race_answer}, models=MODELS) as server:
        s = evaluate(_cfg(tmp_path, server, "drb"), DRB_TASKS, DRB_REPORTS, run, references=_references(tmp_path),
                     progress=False, resamples=200).summary
    assert server.n_requests == 3
    zh, en = PROMPTS.text("drb_race_zh.user")[:40], PROMPTS.text("drb_race_en.user")[:40]
    starts = sorted(body["messages"][0]["content"][:40] for body in server.requests)
    assert starts == sorted([zh, en, en]) and all(len(b["messages"]) == 1 for b in server.requests)

    criteria = {str(t["id"]): t for t in _lines(DRB_TASKS)}
    expected = {}
    for answer in _lines(DRB_ANSWERS):
        task = criteria[answer["id"]]
        weights = {d: {c["criterion"].lower(): c["weight"] for c in task["criterions"][d]} for d in DIMS}
        side = {}
        for key in ("article_1_score", "article_2_score"):
            s_d = {d: sum(weights[d][j["criterion"].lower()] * j[key] for j in answer["answer"][d])
                   / sum(weights[d][j["criterion"].lower()] for j in answer["answer"][d]) for d in DIMS}
            side[key] = sum(task["dimension_weight"][d] * s_d[d] for d in DIMS) / sum(task["dimension_weight"].values())
        expected[answer["id"]] = side["article_1_score"] / (side["article_1_score"] + side["article_2_score"])
    records = _records(run)
    assert {t: r["metrics"]["race"] for t, r in records.items()} == pytest.approx(expected)
    assert s.metrics["race"]["mean"] == pytest.approx(sum(expected.values()) / 3)
    assert s.leaderboard["comparable"] and s.leaderboard["preset"] == "drb"


def test_a_non_official_judge_or_a_pointwise_race_is_labelled_and_the_official_one_is_not(tmp_path):
    """The same preset with another judge (set explicitly: it wins) or without DRB's reference articles (pointwise
    RACE) is labelled in summary.json, report.html and the summary line; eval compare shows each run's label."""
    with FakeOpenAI(stages={"race": _race_answer, "race_pointwise": _pointwise}, models=MODELS) as server:
        official = evaluate(_cfg(tmp_path / "o", server, "drb"), DRB_TASKS, DRB_REPORTS, tmp_path / "official",
                            references=_references(tmp_path), progress=False, resamples=100).summary
        other = evaluate(_cfg(tmp_path / "x", server, "drb", judge="openai/fake-model"), DRB_TASKS, DRB_REPORTS,
                         tmp_path / "other", references=_references(tmp_path), progress=False, resamples=100).summary
        pointwise = evaluate(_cfg(tmp_path / "p", server, "drb"), DRB_TASKS, DRB_REPORTS, tmp_path / "pointwise",
                             progress=False, resamples=100).summary
        bare = evaluate(_cfg(tmp_path / "b", server, None), DRB_TASKS, DRB_REPORTS, tmp_path / "bare",
                        references=_references(tmp_path), progress=False, resamples=100).summary
    assert official.leaderboard["comparable"] and NOT_COMPARABLE not in "\n".join(official.lines())
    assert other.leaderboard["why"] == ["llm.judge.model openai/fake-model, the leaderboard's openai/gpt-5.5"]
    assert f"judge openai/fake-model; {NOT_COMPARABLE} (llm.judge.model openai/fake-model" in "\n".join(other.lines())
    assert pointwise.leaderboard["why"] == ["RACE pointwise, the leaderboard's reference-relative"]
    assert not bare.leaderboard["comparable"] and bare.leaderboard["preset"] is None  # MindDR's prompt, no preset
    summary = json.loads((tmp_path / "other" / "summary.json").read_text())
    assert summary["leaderboard"]["comparable"] is False
    assert NOT_COMPARABLE in (tmp_path / "other" / "report.html").read_text()
    assert "comparable with DeepResearch Bench" in (tmp_path / "official" / "report.html").read_text()
    with pytest.raises(Exception, match=r"judge: openai/gpt-5.5 vs openai/fake-model"):
        compare(tmp_path / "official", tmp_path / "other")  # another judge: refused, as before
    with pytest.raises(Exception, match=r"RACE prompt: drb vs minddr"):  # the same judge with MindDR's prompt
        compare(tmp_path / "official", tmp_path / "bare")
    got = compare(tmp_path / "official", tmp_path / "official")
    assert got["leaderboard"]["A"]["comparable"] is True
    proc = cli("eval", "compare", str(tmp_path / "other"), str(tmp_path / "other"))
    assert proc.returncode == 0, proc.stderr
    assert f"A ({tmp_path / 'other'}): {NOT_COMPARABLE}: llm.judge.model openai/fake-model" in proc.stderr


def _pointwise(body: dict) -> str:
    criteria = json.loads(re.search(r"<criteria_list>(.*?)</criteria_list>", _prompt(body), re.S).group(1))
    return json.dumps({d: [{"criterion": c["criterion"], "score": 5} for c in cs] for d, cs in criteria.items()})


# ---------------------------------------------------------------- settings and the command line


def test_a_preset_fills_what_is_not_set_and_explicit_settings_win():
    cfg = apply(load_config(overrides={"eval": {"preset": "drb2", "rubrics_per_call": 10},
                                       "llm": {"judge": {"max_tokens": 900}}}))
    assert (cfg.llm.judge.model, cfg.llm.judge.temperature, cfg.llm.judge.backend) == ("openai/gpt-5.5", 1.0, "litellm")
    assert cfg.llm.judge.max_tokens == 900 and cfg.eval.rubrics_per_call == 10
    drb = apply(load_config(overrides={"eval": {"preset": "drb"}}))
    assert drb.eval.race_prompt == "drb" and drb.eval.fact_role == "verifier"
    assert drb.llm.verifier.model == "openai/gpt-5.4-mini"
    assert apply(load_config()).llm.judge.model == load_config().llm.judge.model  # no preset: nothing changes
    assert cfg.llm.judge.reasoning_effort == "medium"
    low = apply(load_config(overrides={"eval": {"preset": "drb2"}, "llm": {"judge": {"reasoning_effort": "low"}}}))
    assert label(low, ["drb2"], [])["why"] == ["llm.judge.reasoning_effort low, the leaderboard's medium"]


def test_cli_preset_with_an_explicit_batch_size_is_labelled_and_an_unknown_preset_exits_2(tmp_path):
    with FakeOpenAI(stages={"drb2": _drb2_answer}, models=MODELS) as server:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"llm": _llm(tmp_path, server, "openai/gpt-5.5")}))
        proc = cli("eval", "--tasks", str(DRB2_TASKS), "--reports", str(DRB2_REPORTS), "--preset", "drb2",
                   "--run-dir", str(tmp_path / "run"), "-c", str(config), "-q")
        assert proc.returncode == 0, proc.stderr
        assert "complete: 2 of 2 tasks scored (2 now); judge openai/gpt-5.5\n" in proc.stderr.replace("\r", "")
        small = cli("eval", "--tasks", str(DRB2_TASKS), "--reports", str(DRB2_REPORTS), "--preset", "drb2",
                    "--set", "eval.rubrics_per_call=10", "--run-dir", str(tmp_path / "small"), "-c", str(config), "-q")
    assert small.returncode != 2, small.stderr
    assert f"{NOT_COMPARABLE} (eval.rubrics_per_call 10, the leaderboard's 50)" in " ".join(small.stderr.split())
    bad = cli("eval", "--tasks", str(DRB2_TASKS), "--reports", str(DRB2_REPORTS), "--preset", "drb3")
    assert_user_error(bad, "unknown preset 'drb3' — use --preset drb or --preset drb2")


def test_drb_fact_asks_drbs_validation_prompt_per_source_and_leaves_unknown_out(tmp_path, small_index_cfg):
    """DeepResearch Bench's utils/validate.py: one call per cited source with its statements numbered, verdicts
    supported / unsupported / unknown; utils/stat.py counts only the verdicts that are not unknown (valid_rate =
    supported / (supported + unsupported)). Source A holds statements 1 (supported) and 2 (unknown), source B
    statement 3 (unsupported): precision 1/2, one supported citation, two calls by the FACT judge (gpt-5.4-mini)."""
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.corpora.snippets import stable_id

    with CorpusIndex.from_config(small_index_cfg) as index:
        a, b = (stable_id("search", p.id) for p in list(index.iter_passages())[:2])
    report = (f'<cite id="{a}">First claim.</cite> <cite id="{a}">Second claim.</cite> '
              f'<cite id="{b}">Third claim.</cite>')
    tasks, reports = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl"
    tasks.write_text(json.dumps({"id": "r1", "question": "What holds?"}) + "\n")
    reports.write_text(json.dumps({"id": "r1", "response": report}) + "\n")
    recorded = {"First claim.": "supported", "Second claim.": "unknown", "Third claim.": "unsupported"}

    def validate(body):
        statements = re.search(r"<statements>\n(.*)\n</statements>", _prompt(body), re.S).group(1).splitlines()
        return json.dumps([{"idx": int(s.split(". ", 1)[0]), "result": recorded[s.split(". ", 1)[1]]}
                           for s in statements])

    with FakeOpenAI(stages={"fact_support": validate}, models=MODELS) as server:
        llm = _llm(tmp_path, server, None)
        llm["verifier"] = {k: v for k, v in llm["verifier"].items() if k != "model"}  # the preset's FACT judge
        cfg = load_config(overrides={"llm": llm, "eval": {"preset": "drb"},
                                     "tools": {"index_dir": str(small_index_cfg.index_dir())}})
        s = evaluate(cfg, tasks, reports, tmp_path / "run", asked=["citation"], progress=False, resamples=100).summary
    assert server.n_requests == 2 and {b["model"] for b in server.requests} == {"gpt-5.4-mini"}
    assert all(b["messages"][0]["content"].startswith("You will be provided with a reference and some statements")
               for b in server.requests)
    record = _records(tmp_path / "run")["r1"]
    assert record["metrics"]["citation.precision"] == 0.5 and record["metrics"]["citation.supported"] == 1.0
    assert s.metrics["citation.precision"]["pooled"] == [1.0, 2.0] and record["judge_calls"] == {"fact_support": 2}
    assert s.leaderboard["why"] == ["scorers citation, the leaderboard's race"]  # FACT on the corpus: never the board's


def test_a_drb2_task_whose_content_is_no_rubric_is_bad_input_before_any_call(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "prompt": "p", "content": {"task": "p", "rubric": ["not", "a", "dict"]}})
                     + "\n")
    proc = cli("eval", "--tasks", str(tasks), "--reports", str(DRB2_REPORTS), "--preset", "drb2",
               "--run-dir", str(tmp_path / "run"))
    assert_user_error(proc, "task 't1': 'content' is not a DeepResearch Bench II rubric")
    assert not (tmp_path / "run").exists()
