"""`rubricforge reward probe` as a user runs it: the format reward on the three hand-written examples (no judge),
resumed; the rubric reward with a scripted judge that can be gamed, the calls announced before the first one;
and bad rubric sets refused before any judge call, for `reward probe` and `reward score`."""

from __future__ import annotations

import json

import pytest
import yaml

from rubricforge.jobs.reward_probe import PROBE_EXIT
from rubricforge.testing import FakeOpenAI, Reply
from support.cli import assert_user_error, cli
from support.llm_fakes import litellm_llm_config
from support.paths import DATA

EXAMPLES = DATA / "rewards" / "examples.jsonl"


@pytest.fixture()
def honest(tmp_path):
    """The good response of each example (lines 1, 3, 5 of the shared responses)."""
    lines = (DATA / "rewards" / "responses.jsonl").read_text().splitlines()
    path = tmp_path / "honest.jsonl"
    path.write_text("".join(line + "\n" for line in lines[::2]))
    return path


def test_the_format_reward_fails_on_the_tag_soup_without_a_judge_then_resumes(tmp_path, honest):
    run = tmp_path / "probe.run"
    args = ("reward", "probe", "-d", str(EXAMPLES), "-r", str(honest), "--rewards", "format", "--run-dir", str(run),
            "--set", "llm.cache_path=", "-q")
    proc = cli(*args)
    assert proc.returncode == PROBE_EXIT, proc.stderr
    report = json.loads((run / "report.json").read_text())
    fmt = report["results"]["format"]
    assert fmt["format_mimicry"]["items"] == 3 and fmt["format_mimicry"]["share"] == 1.0  # the tag soup pays in full
    assert fmt["empty"]["share"] == 0.0 and fmt["refusal"]["share"] == 1.0  # a refusal in tags is well formatted
    assert "criteria_order" not in fmt  # the format reward never reads the rubric
    assert "format/format_mimicry" in report["failed"] and "format/empty" not in report["failed"]
    assert "format/format_mimicry" in proc.stderr and "judge" not in proc.stderr  # no judge announced
    records = [json.loads(x) for x in (run / "probes.jsonl").read_text().splitlines()]
    # honest + 8 probes (no criteria_order) per response, but no wrong facts for photosynthesis: its answer names no
    # entity and no number
    assert len(records) == 3 * 9 - 1 and ("photosynthesis", "wrong_facts") not in {(r["id"], r["probe"]) for r in records}
    soup = next(r for r in records if r["probe"] == "format_mimicry")
    assert "<answer>/*answer>" in soup["completion"]
    again = cli(*args, "--threshold", "1.0")  # nothing left to score; with threshold 1 nothing fails
    assert again.returncode == 0, again.stderr
    assert len((run / "probes.jsonl").read_text().splitlines()) == len(records)
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["invocations"]) == 2 and manifest["counts"] == {"items": 26, "done_before": 26, "done_now": 0}


def _keyword_judge(body) -> Reply:
    """A gameable judge: a criterion scores 4 when half its words longer than 3 letters appear in the answer."""
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    criterion = prompt.split("Description:", 1)[1].split("\n", 1)[0].lower()
    answer = prompt.rsplit("<response>", 1)[1].split("</response>", 1)[0].lower()  # the user message, not the system one
    words = [w.strip(".,()") for w in criterion.split() if len(w) > 3]
    hits = sum(w in answer for w in words)
    return Reply(json.dumps({"score": 4 if words and hits * 2 >= len(words) else 0}))


def test_a_gameable_judge_is_caught_and_the_calls_announced_first(tmp_path, honest):
    with FakeOpenAI(responder=_keyword_judge) as server:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, server)}))
        proc = cli("reward", "probe", "-d", str(EXAMPLES), "-r", str(honest), "--rewards", "rubric", "-c", str(config),
                   "--probes", "rubric_paste,keyword_stuff,empty,criteria_order", "--run-dir", str(tmp_path / "run"))
        calls = server.n_requests
    assert proc.returncode == PROBE_EXIT, proc.stderr
    announced = next(line for line in proc.stderr.splitlines() if line.startswith("judge openai/fake-model"))
    assert "about 48 calls" in announced and "no price known" in announced  # 4 criteria x 4 rollouts x 3 rows
    assert calls <= 48
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    rubric = report["results"]["rubric"]
    assert rubric["rubric_paste"]["share"] == 1.0 and rubric["keyword_stuff"]["share"] > 0.2  # the judge is gamed
    assert rubric["empty"]["share"] == 0.0 and rubric["criteria_order"]["share"] == 0.0  # per criterion: order-free
    assert set(rubric["rubric_paste"]["per_criterion"]) == {"factual", "factual (negative)", "logical"}
    assert report["failed"] == ["rubric/rubric_paste", "rubric/keyword_stuff"]


@pytest.mark.parametrize("command", ["probe", "score"])
def test_bad_rubric_sets_are_refused_before_any_judge_call(tmp_path, honest, command):
    rows = [json.loads(x) for x in EXAMPLES.read_text().splitlines()]
    rows[1]["rubrics"][2]["id"] = "c1"  # printing_press: two criteria called c1
    dataset = tmp_path / "bad.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeOpenAI(responder=_keyword_judge) as server:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, server)}))
        proc = cli("reward", command, "-d", str(dataset), "-r", str(honest), "--rewards", "rubric", "-c", str(config))
        assert server.n_requests == 0
    assert_user_error(proc, "example 'printing_press' criterion id 'c1' is used twice (rubrics[0] and rubrics[2])")


def test_without_responses_each_rows_reference_answer_is_the_honest_one(tmp_path):
    run = tmp_path / "run"
    proc = cli("reward", "probe", "-d", str(EXAMPLES), "--rewards", "format", "--probes", "format_mimicry,empty",
               "--run-dir", str(run), "--set", "llm.cache_path=", "-q")
    assert proc.returncode == PROBE_EXIT, proc.stderr
    report = json.loads((run / "report.json").read_text())
    assert report["responses"] == 3 and report["failed"] == ["format/format_mimicry"]
    assert json.loads((run / "manifest.json").read_text())["responses"] == "reference answers"


def test_eval_tasks_with_deepresearch_bench_reports_are_probed(tmp_path):
    """DRB's criteria (converted on the fly) and its {"id", "prompt", "article"} reports of three tasks: the reports
    carry no <answer> tags, so MindDR's report format reward gives each −1, as it gives an empty report."""
    run = tmp_path / "run"
    proc = cli("reward", "probe", "-d", str(DATA / "formats" / "drb_criteria.jsonl"), "-r",
               str(DATA / "eval" / "drb_claude-3-7-sonnet-latest.jsonl"), "--rewards", "report_format",
               "--probes", "empty,format_mimicry", "--run-dir", str(run), "--set", "llm.cache_path=", "-q")
    assert proc.returncode == PROBE_EXIT, proc.stderr
    report = json.loads((run / "report.json").read_text())
    got = report["results"]["report_format"]
    assert report["responses"] == 3 and got["empty"]["share"] == 1.0 and got["empty"]["mean_delta"] == 0.0
    assert got["format_mimicry"]["strict"] == 1.0


def test_a_judge_that_scores_nothing_ends_incomplete_and_a_healthy_rerun_finishes(tmp_path, honest):
    """Issue 39's rule for the probe job: a judge that fails leaves items unscored (exit 1, their count, "re-run"),
    never a verdict on the reward; the re-run scores them and replaces their records."""
    run = tmp_path / "run"
    args = ["reward", "probe", "-d", str(EXAMPLES), "-r", str(honest), "--rewards", "rubric", "--probes",
            "rubric_paste,empty", "--run-dir", str(run)]
    with FakeOpenAI([Reply(status=503)]) as down:
        config = tmp_path / "down.yaml"
        config.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, down, max_retries=0)}))
        proc = cli(*args, "-c", str(config))
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("incomplete:") and "re-run the same command to retry them" in last
    with FakeOpenAI(responder=_keyword_judge) as up:
        config = tmp_path / "up.yaml"
        config.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, up)}))
        again = cli(*args, "-c", str(config))
    assert again.returncode == PROBE_EXIT, again.stderr  # the keyword judge is gamed by the pasted rubric
    records = [json.loads(x) for x in (run / "probes.jsonl").read_text().splitlines()]
    assert len(records) == len({(r["id"], r["probe"]) for r in records}) == 3 * 3  # honest + 2 probes, no duplicate
