"""`rubricforge reward score` and `judge agreement` (formerly `reward audit`) as a user runs them, against the scripted
judge: per-component JSONL, summary, bad lines skipped and counted, resume, and one-line errors."""

from __future__ import annotations

import json

import pytest
import yaml

from rubricforge.testing import FakeOpenAI, Reply
from support.cli import assert_user_error, cli
from support.llm_fakes import litellm_llm_config
from support.reward_fixtures import EXAMPLE, ROLLOUT, SCRIPTED_JUDGE


@pytest.fixture()
def files(tmp_path):
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(json.dumps(EXAMPLE) + "\n")
    responses = tmp_path / "responses.jsonl"
    responses.write_text("\n".join([json.dumps({"id": "ex1", "response": ROLLOUT}),
                                    "{not json",
                                    json.dumps({"id": "nope", "response": ROLLOUT}),
                                    json.dumps({"id": "ex1", "response": "<think>gave up</think>"})]) + "\n")
    return dataset, responses


def _config(tmp_path, server, **role) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path, server, **role)}))
    return str(path)


def test_score_writes_components_summary_and_rejects_then_resumes(tmp_path, files):
    dataset, responses = files
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        config = _config(tmp_path, server)
        proc = cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c", config, "-q")
        assert proc.returncode == 0, proc.stderr
        calls = server.n_requests
        again = cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c", config, "-q")
    assert again.returncode == 0 and server.n_requests == calls and "(0 scored now)" in again.stderr
    lines = [json.loads(x) for x in (tmp_path / "responses.scores.jsonl").read_text().splitlines()]
    assert [(r["id"], r["line"]) for r in lines] == [("ex1", 1), ("ex1", 4)] or \
           sorted((r["id"], r["line"]) for r in lines) == [("ex1", 1), ("ex1", 4)]
    by_line = {r["line"]: r["rewards"] for r in lines}
    assert by_line[1]["rubric"]["value"] == pytest.approx(1.25 / 1.5)
    assert by_line[4]["rubric"]["value"] == 0.0 and by_line[4]["format"]["value"] == pytest.approx(0.2)
    summary = json.loads((tmp_path / "responses.scores.summary.json").read_text())
    assert summary["rewards"]["composite"]["scored"] == 2 and summary["rejects"]["total"] == 2
    rejects = [json.loads(x) for x in (tmp_path / "responses.rejects.jsonl").read_text().splitlines()]
    assert sorted(r["line"] for r in rejects) == [2, 3] and "not in the dataset" in rejects[1]["reason"]
    assert "composite" in proc.stderr and "skipped 2 bad lines" in proc.stderr


def test_a_score_run_an_older_release_wrote_resumes(tmp_path, files):
    """Its manifest named the kind `pipeline: score` (now `job: reward-score`)."""
    dataset, responses = files
    manifest = tmp_path / "responses.scores.run" / "manifest.json"
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        config = _config(tmp_path, server)
        assert cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c", config, "-q",
                   "--rewards", "format").returncode == 0
        old = {k: v for k, v in json.loads(manifest.read_text()).items() if k != "job"}
        manifest.write_text(json.dumps({**old, "pipeline": "score"}))
        again = cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c", config, "-q", "--rewards", "format")
    assert again.returncode == 0 and "(0 scored now)" in again.stderr, again.stderr
    assert json.loads(manifest.read_text())["job"] == "reward-score"


def test_unscored_responses_are_retried_by_the_next_run(tmp_path, files):
    dataset, responses = files
    with FakeOpenAI([Reply(status=503)]) as down:
        proc = cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c",
                   _config(tmp_path, down, max_retries=0), "-q", "--rewards", "rubric")
    assert proc.returncode == 1 and "incomplete: 1 of 2 responses unscored" in proc.stderr  # re-run to retry it
    first = json.loads((tmp_path / "responses.scores.summary.json").read_text())
    assert first["rewards"]["rubric"]["unscored"] == 1 and first["rewards"]["rubric"]["scored"] == 1
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as up:
        proc = cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c", _config(tmp_path, up), "-q",
                   "--rewards", "rubric")
    assert proc.returncode == 0 and "(1 scored now)" in proc.stderr
    assert json.loads((tmp_path / "responses.scores.summary.json").read_text())["rewards"]["rubric"]["unscored"] == 0


def test_scoring_nothing_is_not_a_success(tmp_path, files):
    """No line names a dataset example: exit 2 naming the reason. Every judge call failed: exit 1."""
    dataset, _ = files
    strangers = tmp_path / "strangers.jsonl"
    strangers.write_text("".join(json.dumps({"id": f"other{i}", "response": ROLLOUT}) + "\n" for i in range(3)))
    assert_user_error(cli("reward", "score", "-d", str(dataset), "-r", str(strangers), "--set", "llm.cache_path="),
                      f"nothing to score in {strangers}", "all 3 lines were rejected",
                      "id 'other0' is not in the dataset")
    answered = tmp_path / "answered.jsonl"
    answered.write_text(json.dumps({"id": "ex1", "response": ROLLOUT}) + "\n")
    with FakeOpenAI([Reply(status=503)]) as down:
        proc = cli("reward", "score", "-d", str(dataset), "-r", str(answered), "-c",
                   _config(tmp_path, down, max_retries=0), "-q", "--rewards", "rubric")
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith(
        "incomplete: 1 of 1 responses unscored; finished work is kept and written out: re-run the same command")
    assert json.loads((tmp_path / "answered.scores.summary.json").read_text())["rewards"]["rubric"]["unscored"] == 1


def test_judge_agreement_prints_variance_and_agreement_and_reward_audit_still_runs_it(tmp_path, files):
    dataset, responses = files
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        out = tmp_path / "audit.json"
        args = ["-d", str(dataset), "-r", str(responses), "-c", _config(tmp_path, server)]
        proc = cli("judge", "agreement", *args, "--out", str(out))
        calls = server.n_requests
        again = cli("reward", "audit", *args)  # the old name, for one release; resumes: nothing is judged again
    assert proc.returncode == 0, proc.stderr
    assert again.returncode == 0 and server.n_requests == calls, again.stderr
    assert again.stderr.splitlines()[0] == ("deprecated: `rubricforge reward audit` is now `rubricforge judge agreement`; "
                                            "the old name goes in the next release")
    assert "deprecated" not in proc.stderr
    run = responses.with_name(f"{responses.stem}.audit.run")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["counts"]["done_now"] == 0 and manifest["ledger"]
    assert json.loads((run / "report.json").read_text())["agreement"] == json.loads(out.read_text())["agreement"]
    report = json.loads(out.read_text())
    assert report["criteria"] == 3 and report["skipped_no_answer"] == 1
    assert report["variance"]["mean"] == 0.0  # the scripted judge never wavers
    assert report["agreement"]["per_criterion_vs_batched"]["exact"] == 1.0
    assert report["agreement"]["judge_vs_second_judge"]["kappa_quadratic"] == 1.0
    assert "per_criterion_vs_batched" in proc.stderr


@pytest.mark.parametrize("args, needles", [
    (["reward", "score", "-d", "missing.jsonl", "-r", "r.jsonl"], ["missing.jsonl"]),
    (["reward", "score", "-d", "DATA", "-r", "missing.jsonl"], ["missing.jsonl"]),
    (["reward", "score", "-d", "DATA", "-r", "RESP", "--rewards", "rubrik"], ["unknown reward 'rubrik'"]),
    (["reward", "score", "-d", "DATA", "-r", "RESP", "--rewards", "race"],
     ["'ex1' has no 'race_rubrics' column (the 'race' reward reads it)"]),
    (["judge", "agreement", "-d", "DATA", "-r", "RESP", "--second-judge", "critic"], ["critic"]),
])
def test_bad_input_is_one_line_and_exit_code_2(args, needles, files, tmp_path, monkeypatch):
    dataset, responses = files
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")  # relative paths such as missing.jsonl resolve here
    args = [str(dataset) if a == "DATA" else str(responses) if a == "RESP" else a for a in args]
    assert_user_error(cli(*args, "--set", "llm.cache_path="), *needles)
    assert not any((tmp_path / "empty").iterdir())  # nothing half-written next to a missing input


def test_score_reads_dr_tulu_rows_and_deeprubric_files(tmp_path):
    """Rows as DR Tulu and DeepRubric ship them (no id, no type) are scored; DR Tulu rows get their row number as
    id. A rollout with no known tags is reported instead of a silent 0."""
    from support.reward_fixtures import QUESTION, RUBRICS

    drtulu = tmp_path / "drtulu.jsonl"
    truth = {"query": QUESTION, "rubrics": [{k: r[k] for k in ("description", "weight")} for r in RUBRICS]}
    drtulu.write_text(json.dumps({"messages": [{"role": "user", "content": QUESTION}], "source": "x",
                                  "ground_truth": json.dumps(truth), "dataset": "general_rubric"}) + "\n")
    deeprubric = tmp_path / "deeprubric.jsonl"
    deeprubric.write_text(json.dumps({"question": QUESTION, "answer": "", "golden_answers": RUBRICS,
                                      "data_source": "long_form", "reward_model": "rubric"}) + "\n")
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": 0, "response": ROLLOUT}) + "\n"
                         + json.dumps({"id": 0, "response": "The tower is 330 m tall."}) + "\n")
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        config = _config(tmp_path, server)
        for dataset in (drtulu, deeprubric):
            out = tmp_path / f"{dataset.stem}.scores.jsonl"
            proc = cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c", config, "-q",
                       "--rewards", "rubric,format", "--out", str(out))
            assert proc.returncode == 0, proc.stderr
            by_line = {r["line"]: r for r in map(json.loads, out.read_text().splitlines())}
            assert by_line[1]["rewards"]["rubric"]["value"] == pytest.approx(1.25 / 1.5)
            assert by_line[1]["protocol"] == "deeprubric" and by_line[2]["protocol"] is None
            assert by_line[2]["rewards"]["format"]["value"] == 0.0
            assert "1 responses hold no known tags" in proc.stderr


def test_a_rubric_without_text_names_the_field_and_the_converter(tmp_path):
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(json.dumps({**EXAMPLE, "rubrics": [{"id": "c1", "type": "logical", "weight": 1.0}]}) + "\n")
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": "ex1", "response": ROLLOUT}) + "\n")
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        proc = cli("reward", "score", "-d", str(dataset), "-r", str(responses), "-c", _config(tmp_path, server),
                   "-q", "--rewards", "rubric")
    assert_user_error(proc, "rubrics[0] has no 'description'", "rubricforge convert")
