"""Each surface added since the build (eval, eval compare, judge audit, convert, reward score) under faults, as a
hostile user runs it against a fake judge on loopback: a judge that fails, answers partly or is given garbage
input. The exit code tells the truth (0 only when every item is done; items unscored: 1 with "re-run the same
command" and the count; bad input: one line, exit 2), a re-run replaces a record instead of appending one, an
incomplete judge answer is resampled and never replayed from the cache, and no command empties its output."""

from __future__ import annotations

import itertools
import json
import re

import pytest
import yaml

from rubricforge.config import load_config
from rubricforge.evaluation.tasks import MAX_REPORT_CHARS
from rubricforge.jobs.evaluate import evaluate
from rubricforge.testing import FakeOpenAI, Reply
from support.cli import assert_user_error, cli
from support.llm_fakes import litellm_llm_config
from support.paths import DATA
from support.reward_fixtures import EXAMPLE, ROLLOUT, SCRIPTED_JUDGE

DRB_TASKS = DATA / "formats" / "drb_criteria.jsonl"  # tasks 1, 46, 51, 75
DRB_REPORTS = DATA / "eval" / "drb_claude-3-7-sonnet-latest.jsonl"  # reports of tasks 1, 51, 75
LABELS = DATA / "judge_audit" / "labels.jsonl"  # 3 reports, 12 points
BINARY = bytes(range(255, -1, -1)) * 8  # not UTF-8 text from its first line on
RETRY = "re-run the same command to retry them"


def _criteria(body: dict) -> dict:
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    return json.loads(re.search(r"<criteria_list>(.*?)</criteria_list>", prompt, re.S).group(1))


def _pointwise(body: dict, drop: bool = False) -> str:
    """Every criterion scored 5; ``drop``: the last comprehensiveness criterion left out (valid JSON, incomplete)."""
    got = {d: [{"criterion": c["criterion"], "score": 5} for c in cs] for d, cs in _criteria(body).items()}
    if drop:
        got["comprehensiveness"].pop()
    return json.dumps(got)


def _config(tmp_path, server, **role) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, server, **role)}))
    return str(path)


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _last(proc) -> str:
    return proc.stderr.strip().splitlines()[-1]


# ---------------------------------------------------------------- eval


def test_eval_with_a_judge_that_scores_nothing_exits_1_counting_scored_tasks_and_a_rerun_replaces_records(tmp_path):
    run = tmp_path / "run"
    args = ["eval", "--tasks", str(DRB_TASKS), "--reports", str(DRB_REPORTS), "--run-dir", str(run), "-q"]
    with FakeOpenAI(stages={"race_pointwise": Reply(status=503)}) as down:
        proc = cli(*args, "-c", _config(tmp_path, down, max_retries=0))
    assert proc.returncode == 1, proc.stderr
    assert "incomplete: 0 of 4 tasks scored (0 now, 3 unscored, 1 without a report)" in proc.stderr
    assert _last(proc).startswith("incomplete: 3 of 3 tasks unscored") and RETRY in _last(proc)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"].startswith("incomplete: 3 of 3") and manifest["counts"]["scored"] == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"]["race"]["unscored"] == 3  # each dimension too, not "unscored 0"
    assert summary["metrics"]["race.insight"]["unscored"] == 3 and summary["metrics"]["race.insight"]["n"] == 0
    with FakeOpenAI(stages={"race_pointwise": _pointwise}) as up:
        again = cli(*args, "-c", _config(tmp_path, up))
    assert again.returncode == 0, again.stderr
    assert "complete: 3 of 4 tasks scored (3 now, 1 without a report)" in again.stderr
    assert sorted(r["key"] for r in _lines(run / "tasks.jsonl")) == ["1", "51", "75"]  # replaced, not appended


def test_eval_with_one_task_unscored_counts_scored_tasks_not_attempted_ones(tmp_path):
    calls = itertools.count()

    def second_fails(body: dict) -> Reply | str:  # one task at a time: the second task's call fails
        return Reply(status=503) if next(calls) == 1 else _pointwise(body)

    with FakeOpenAI(stages={"race_pointwise": second_fails}) as server:
        proc = cli("eval", "--tasks", str(DRB_TASKS), "--reports", str(DRB_REPORTS), "--run-dir", str(tmp_path / "r"),
                   "-q", "-c", _config(tmp_path, server, max_retries=0), "--set", "reward.concurrency=1")
    assert proc.returncode == 1, proc.stderr
    assert "incomplete: 2 of 4 tasks scored (2 now, 1 unscored, 1 without a report)" in proc.stderr
    assert _last(proc).startswith("incomplete: 1 of 3 tasks unscored") and RETRY in _last(proc)


def test_an_incomplete_race_answer_is_resampled_and_never_replayed_from_the_cache(tmp_path):
    def until_told(body: dict) -> str:  # incomplete, unless re-prompted with what is missing
        told = "does not score every criterion" in str(body["messages"][-1].get("content", ""))
        return _pointwise(body, drop=not told)

    with FakeOpenAI(stages={"race_pointwise": until_told}) as server:
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, server)})
        s = evaluate(cfg, DRB_TASKS, DRB_REPORTS, tmp_path / "a", progress=False).summary
    assert s.status == "complete" and s.scored == 3 and server.n_requests == 6  # one resample each
    assert "comprehensiveness scores" in server.requests[-1]["messages"][-1]["content"]

    run = tmp_path / "b"
    with FakeOpenAI(stages={"race_pointwise": lambda body: _pointwise(body, drop=True)}) as partly:
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, partly, structured_retries=1)})
        s = evaluate(cfg, DRB_TASKS, DRB_REPORTS, run, progress=False).summary
    assert s.status == "incomplete: 3 of 3 tasks unscored" and partly.n_requests == 6  # bounded: 1 + 1 each
    assert s.scored == s.scored_now == 0
    with FakeOpenAI(stages={"race_pointwise": _pointwise}) as whole:  # the same cache: nothing replayed from it
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, whole, structured_retries=1)})
        s = evaluate(cfg, DRB_TASKS, DRB_REPORTS, run, progress=False).summary
    assert s.status == "complete" and whole.n_requests == 3 and s.scored_now == 3
    assert len(_lines(run / "tasks.jsonl")) == 3


def test_limit_leaves_other_tasks_reports_out_quietly_and_an_oversized_report_is_refused(tmp_path):
    reports = tmp_path / "reports.jsonl"
    lines = DRB_REPORTS.read_text().splitlines()
    huge = {**json.loads(lines[1]), "article": "x" * (MAX_REPORT_CHARS + 1)}  # task 51
    reports.write_text("\n".join([lines[0], json.dumps(huge), lines[2]]) + "\n")
    with FakeOpenAI(stages={"race_pointwise": _pointwise}) as server:
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, server)})
        one = evaluate(cfg, DRB_TASKS, reports, tmp_path / "one", limit=1, progress=False).summary
        assert one.rejects["total"] == 0 and not (tmp_path / "one" / "rejects.jsonl").exists()
        assert (one.status, one.tasks, one.scored) == ("complete", 1, 1)
        calls = server.n_requests
        every = evaluate(cfg, DRB_TASKS, reports, tmp_path / "all", progress=False).summary
    assert server.n_requests - calls == 1  # task 75 (task 1 from the cache); task 51's report never went
    assert max(len(json.dumps(r)) for r in server.requests) < MAX_REPORT_CHARS
    assert every.rejects["total"] == 1 and "over 400,000 characters" in next(iter(every.rejects["by_reason"]))
    assert (every.status, every.reports, every.scored) == ("complete", 2, 2)


# ---------------------------------------------------------------- eval compare, judge audit


def test_eval_compare_refuses_runs_it_cannot_read_in_one_line(tmp_path):
    with FakeOpenAI(stages={"race_pointwise": _pointwise}) as server:
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, server)})
        evaluate(cfg, DRB_TASKS, DRB_REPORTS, tmp_path / "a", progress=False)
    (tmp_path / "b").mkdir()
    for name in ("manifest.json", "config.yaml"):
        (tmp_path / "b" / name).write_bytes((tmp_path / "a" / name).read_bytes())
    (tmp_path / "b" / "tasks.jsonl").write_bytes(BINARY)
    assert_user_error(cli("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")), "tasks.jsonl",
                      "holds no task record")
    (tmp_path / "b" / "tasks.jsonl").write_text(json.dumps({"key": "1", "id": "1", "scores": {}}) + "\n")
    assert_user_error(cli("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")),
                      "record '1' has no 'metrics'")


def test_judge_audit_with_a_judge_that_scores_nothing_exits_1_counting_points(tmp_path):
    with FakeOpenAI(stages={"rubric": Reply(status=503), "rubric_batched": Reply(status=503)}) as down:
        proc = cli("judge", "audit", "--labels", str(LABELS), "--run-dir", str(tmp_path / "run"), "-q",
                   "-c", _config(tmp_path, down, max_retries=0))
    assert proc.returncode == 1, proc.stderr
    assert "per_criterion: 0 of 12 points scored" in proc.stderr and "batched: 0 of 12 points scored" in proc.stderr
    assert _last(proc).startswith("incomplete: 24 of 24 points unscored (both modes)") and RETRY in _last(proc)


# ---------------------------------------------------------------- reward score


def test_reward_score_with_one_response_unscored_exits_1_and_a_rerun_replaces_its_record(tmp_path):
    dataset, responses = tmp_path / "data.jsonl", tmp_path / "responses.jsonl"
    dataset.write_text(json.dumps(EXAMPLE) + "\n")
    responses.write_text(json.dumps({"id": "ex1", "response": ROLLOUT}) + "\n"
                         + json.dumps({"id": "ex1", "response": "<think>gave up</think>"}) + "\n")
    args = ["reward", "score", "-d", str(dataset), "-r", str(responses), "-q", "--rewards", "rubric"]
    with FakeOpenAI([Reply(status=503)]) as down:
        proc = cli(*args, "-c", _config(tmp_path, down, max_retries=0))
    assert proc.returncode == 1, proc.stderr
    assert "2 responses (1 scored now)" in proc.stderr  # the empty answer scores 0 without a judge
    assert _last(proc).startswith("incomplete: 1 of 2 responses unscored") and RETRY in _last(proc)
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as up:
        again = cli(*args, "-c", _config(tmp_path, up))
    assert again.returncode == 0 and "(1 scored now)" in again.stderr, again.stderr
    assert len(_lines(tmp_path / "responses.scores.jsonl")) == 2


@pytest.mark.parametrize("command", ["reward", "eval"])
def test_a_binary_dataset_or_task_set_is_one_line(tmp_path, command):
    binary = tmp_path / "data.jsonl"
    binary.write_bytes(BINARY)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": "ex1", "response": ROLLOUT}) + "\n")
    args = (["reward", "score", "-d", str(binary), "-r", str(responses)] if command == "reward" else
            ["eval", "--tasks", str(binary), "--reports", str(responses), "--run-dir", str(tmp_path / "run")])
    assert_user_error(cli(*args, "--set", "llm.cache_path="), f"{binary} is not UTF-8 text", "UTF-8")


# ---------------------------------------------------------------- convert


@pytest.mark.parametrize("source", ["empty", "rejected"])
def test_a_conversion_that_produces_nothing_leaves_the_destination_as_it_was(tmp_path, source):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("" if source == "empty" else json.dumps({"id": "a", "question": "q", "rubrics": []}) + "\n")
    dst.write_text("good rows\n")
    proc = cli("convert", str(src), str(dst), "--from", "rubricforge", "--to", "drtulu")
    assert_user_error(proc, "nothing converted", f"{dst} is left as it was")
    assert dst.read_text() == "good rows\n"


def test_convert_refuses_a_binary_source_and_a_folder_destination_in_one_line(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(BINARY)
    assert_user_error(cli("convert", str(src), str(tmp_path / "out.jsonl")), f"{src} is not UTF-8 text")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(EXAMPLE) + "\n")
    (tmp_path / "folder").mkdir()
    assert_user_error(cli("convert", str(good), str(tmp_path / "folder")), "is a folder", "pass a file")
