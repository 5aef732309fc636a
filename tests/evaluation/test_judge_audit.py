"""`rubricforge judge audit` against the hand-made labels of tests/data/judge_audit/labels.jsonl (3 reports, 12 rubric
points in 4 categories, written for these tests), with a scripted judge reached over HTTP: balanced accuracy per
category, overall and macro, computed by hand below; calls and tokens per mode; resume; bad label files."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.evaluation.labels import load_labels
from rubricforge.evaluation.stats import balanced_accuracy
from rubricforge.jobs.judge_audit import audit_judge
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.paths import DATA

LABELS = DATA / "judge_audit" / "labels.jsonl"
# the per-call judge's 0-4 score of each point (covered at >= 3); the human label in the comment
PER_CALL = {
    "Explains that the rings of prisms": 4,  # yes -> yes
    "States that Augustin Fresnel": 3,  # yes -> yes
    "Gives the range of a first-order lens": 1,  # no -> no
    "Presents the comparison of lens orders": 3,  # no -> yes (wrong)
    "Names lactic acid bacteria": 4,  # yes -> yes
    "Gives a typical starter feeding ratio": 2,  # yes -> no (wrong)
    "Explains why the sour taste grows": 0,  # no -> no
    "Uses section headings": 4,  # yes -> yes
    "Explains that the Moon's pull differs": 3,  # yes -> yes
    "States that spring tides happen": 4,  # yes -> yes
    "Mentions that the two high tides repeat": 2,  # no -> no
    "Names the Bay of Fundy": 3,  # no -> yes (wrong)
}


def _per_call(body) -> str:
    prompt = "\n".join(m["content"] for m in body["messages"])
    (score,) = [s for start, s in PER_CALL.items() if f"Description: {start}" in prompt]
    return json.dumps({"score": score})


def _batched(body) -> str:
    prompt = "\n".join(m["content"] for m in body["messages"])
    return json.dumps({"scores": [{"id": i, "score": 3} for i in re.findall(r'<criterion id="(\w+)"', prompt)]})


# per call: the score of PER_CALL; batched: 3 for every point (everything covered)
AUDIT_JUDGE = {"rubric": _per_call, "rubric_batched": _batched}


def test_balanced_accuracy_by_hand():
    assert balanced_accuracy([True, True, False, False], [True, False, False, False]) == pytest.approx((0.5 + 1) / 2)
    assert balanced_accuracy([True, True, True], [True, False, True]) == pytest.approx(2 / 3)  # one class: its recall
    assert balanced_accuracy([], []) is None


def test_audit_balanced_accuracy_per_category_and_mode(tmp_path):
    with FakeOpenAI(stages=AUDIT_JUDGE) as server:
        cfg = Config.model_validate({"llm": litellm_llm_config(tmp_path, server)})
        s = audit_judge(cfg, LABELS, tmp_path / "run", progress=False).summary
        requests = len(server.requests)
        again = audit_judge(cfg, LABELS, tmp_path / "run", progress=False).summary  # resumes: nothing left
        assert len(server.requests) == requests
    assert (s.status, s.reports, s.points, s.judged_now, again.judged_now) == ("complete", 3, 12, 6, 0)
    one, batched = s.modes["per_criterion"], s.modes["batched"]
    # per call, by category: facts yes 2/2, no 0/1 -> 0.5; numbers yes 1/2, no 2/2 -> 0.75; logic 2/2, 1/1 -> 1.0;
    # format yes 1/1, no 0/1 -> 0.5
    assert {c: v["balanced_accuracy"] for c, v in one["categories"].items()} == pytest.approx(
        {"facts": 0.5, "format": 0.5, "logic": 1.0, "numbers": 0.75})
    # all 12 points: 7 covered, 6 of them found; 5 not covered, 3 of them found
    assert one["overall"]["balanced_accuracy"] == pytest.approx((6 / 7 + 3 / 5) / 2)
    assert one["macro"] == pytest.approx((0.5 + 0.75 + 1.0 + 0.5) / 4)
    assert one["overall"]["accuracy"] == pytest.approx(9 / 12)
    # batched: every point called covered, so every recall of "no" is 0
    assert all(v["balanced_accuracy"] == 0.5 for v in batched["categories"].values())
    assert s.delta["overall"] == pytest.approx(0.5 - (6 / 7 + 3 / 5) / 2)
    assert s.delta["macro"] == pytest.approx(0.5 - 0.6875)
    # what batching saves: 12 calls against 3, each request 11 prompt + 7 completion tokens (the fake's)
    assert (one["calls"], batched["calls"]) == (12, 3)
    assert one["tokens"] == {"requests": 12, "prompt_tokens": 132, "completion_tokens": 84}
    assert batched["tokens"] == {"requests": 3, "prompt_tokens": 33, "completion_tokens": 21}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["modes"]["per_criterion"]["macro"] == pytest.approx(0.6875)
    verdicts = [json.loads(line) for line in (tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(v["key"] for v in verdicts) == sorted(f"{m}:{r}" for m in ("per_criterion", "batched")
                                                        for r in ("lighthouse", "sourdough", "tides"))


def test_cli_prints_the_table_and_refuses_another_judge_in_the_same_run(tmp_path):
    from rubricforge.cli import app

    with FakeOpenAI(stages=AUDIT_JUDGE) as server:
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, server)}))
        args = ["judge", "audit", "--labels", str(LABELS), "--run-dir", str(tmp_path / "run"), "--config", str(cfg), "-q"]
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 0, out.output
        assert "category mean" in out.output and "0.688" in out.output and "-0.188" in out.output
        assert "per_criterion: 12 of 12 points scored, 12 judge calls (4.0 per report)" in out.output
        with pytest.raises(UserError, match="holds records made with other settings"):
            audit_judge(Config.model_validate({"llm": litellm_llm_config(tmp_path, server, model="openai/other")}),
                        LABELS, tmp_path / "run", progress=False)


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "a", "question": "q", "response": "r", "rubric": [{"point": "p", "covered": "maybe"}]}',
     r"bad.jsonl:2: 'rubric\[0\].covered' is 'maybe', not true/false"),
    ('{"id": "a", "question": "q", "rubric": [{"point": "p", "covered": true}]}', r"bad.jsonl:2: 'response' is missing"),
    ('{"id": "a", "question": "q", "response": "r", "rubric": []}', r"bad.jsonl:2: 'rubric' is missing or not"),
    ('{"id": "a", "question": "q", "response": "r", "rubric": [{"covered": true}]}', r"'rubric\[0\].point' is missing"),
    ('{"id": "t"', r"bad.jsonl:2 is not valid JSON"),
    ('{"id": "tides", "question": "q", "response": "r", "rubric": [{"point": "p", "covered": 1}]}',
     r"bad.jsonl:2: 'id' 'tides' repeats"),
])
def test_a_bad_label_names_file_line_and_field(tmp_path, line, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(LABELS.read_text().splitlines()[2] + "\n" + line + "\n")
    with pytest.raises(UserError, match=message):
        load_labels(bad)


def test_cli_bad_label_file_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q", "response": "r", "rubric": [{"point": "p", "covered": "maybe"}]}\n')
    proc = subprocess.run([sys.executable, "-m", "rubricforge.cli", "judge", "audit", "--labels", str(bad),
                           "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "bad.jsonl:1: 'rubric[0].covered'" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_json_list_layout_is_read_too(tmp_path):
    records = [json.loads(line) for line in LABELS.read_text().splitlines()]
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(records))
    reports = load_labels(path)
    assert [r.id for r in reports] == ["lighthouse", "sourdough", "tides"]
    assert [p.covered for p in reports[0].points] == [True, True, False, False]
    records[1]["rubric"][0]["category"] = 7
    path.write_text(json.dumps(records))
    with pytest.raises(UserError, match=r"labels.json record 2: 'rubric\[0\].category' is not a non-empty string"):
        load_labels(path)
