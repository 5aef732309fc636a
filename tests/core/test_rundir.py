"""The run directory (:mod:`rubricforge.rundir`), its stage logs (:mod:`rubricforge.io.stagelog`) and the job
layer's bookkeeping (:mod:`rubricforge.jobs.base`):
sharded stage logs read back and merged, typed records validated on read, one JSON reader, the manifest,
the resume guards, how a job ends, and paths resolved on the driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubricforge.config import Config
from rubricforge.errors import BudgetExceeded, UserError
from rubricforge.jobs.base import ending, on_driver, retryable, status_of
from rubricforge.io.files import read_json
from rubricforge.io.stagelog import StageLog
from rubricforge.export.kg_viewer import is_kg_run
from rubricforge.rundir import RunDir, job_kind
from rubricforge.schema import KGQuestion
from support.config import derive


def test_worker_shards_are_read_with_the_log_and_merged_into_it(tmp_path):
    path = tmp_path / "trees.jsonl"
    StageLog(path).append("t0", {"v": 0})
    a, b = StageLog(path, shard="a"), StageLog(path, shard="b")
    a.append("t1", {"v": 1})
    b.append("t2", {"v": 2})
    b.append("t0", {"v": 9})  # a redone item: the shard's line is the later one
    with (tmp_path / "trees.shards" / "a.jsonl").open("a") as fh:
        fh.write('{"key": "t3", "v"')  # a torn last line, as after a SIGKILL
    assert path.read_text().count("\n") == 1  # workers never append to the log itself
    before = StageLog(path)
    assert {k: r["v"] for k, r in zip(before.keys(), before.records(), strict=True)} == {"t0": 9, "t1": 1, "t2": 2}

    assert before.merge() == 3
    assert not (tmp_path / "trees.shards").exists()
    assert [json.loads(x)["key"] for x in path.read_text().splitlines()] == ["t0", "t1", "t2", "t0"]
    after = StageLog(path)
    assert after.records() == before.records() and after.merge() == 0


def test_typed_records_are_validated_when_read_back(tmp_path):
    log = StageLog(tmp_path / "kg_questions.jsonl", model=KGQuestion)
    log.add("kgp-0000", KGQuestion(question="Which river...?"))
    log.append("kgp-0001", {"question": ["not", "a", "string"]})
    again = StageLog(tmp_path / "kg_questions.jsonl", model=KGQuestion)
    assert again.item("kgp-0000") == KGQuestion(question="Which river...?") and again.item("missing") is None
    with pytest.raises(UserError, match=r"kg_questions.jsonl record 'kgp-0001' does not match the KGQuestion "
                                        r"schema \(question: "):
        again.item("kgp-0001")


def test_read_json_missing_is_empty_and_anything_else_names_the_file(tmp_path):
    assert read_json(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="bad.json is not readable JSON"):
        read_json(tmp_path / "bad.json")
    with pytest.raises(UserError, match="list.json does not hold a JSON object"):
        read_json(tmp_path / "list.json")


def test_manifest_sums_every_workers_ledger_and_status_changes_only_a_listed_invocation(tmp_path):
    run = RunDir(tmp_path / "run", "kg")
    for worker, calls in (("w1", 2), ("w2", 3)):
        path = run.ledger_path("inv1", worker)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"ledger": {"total": {"calls": calls}}, "computed": {"trees": 1}}))
    run.write_manifest("inv1", "2026-01-01T00:00:00+00:00", "running", {"models": {"generator": "m"}}, {"paths": 1})
    manifest = run.manifest()
    assert manifest["job"] == manifest["pipeline"] == "kg" and manifest["status"] == "running" and manifest["counts"] == {"paths": 1}
    assert manifest["ledger"]["total"]["calls"] == 5 and manifest["models"] == {"generator": "m"}
    run.set_status("never-started", "failed: x")
    assert run.manifest()["status"] == "running"
    run.set_status("inv1", "stopped: LLM budget reached")
    manifest = run.manifest()
    assert manifest["status"] == manifest["invocations"][0]["status"] == "stopped: LLM budget reached"


def test_resume_guards_refuse_another_pipeline_or_other_settings(tmp_path):
    tree_run = RunDir(tmp_path, "tree")
    (tmp_path / "trees.jsonl").write_text("")
    tree_run.check_kind()
    with pytest.raises(UserError, match="holds an evidence-tree run"):
        RunDir(tmp_path, "kg").check_kind()
    tree_run.write_manifest("i", "2026-01-01T00:00:00+00:00", "complete", {"tree_settings": {"seed": 0, "depth": 3}})
    tree_run.check_settings("tree_settings", {"seed": 0, "depth": 2}, has_work=False, what="trees")
    with pytest.raises(UserError, match=r"holds trees made with other settings \(depth: 3 -> 2\)"):
        tree_run.check_settings("tree_settings", {"seed": 0, "depth": 2}, has_work=True, what="trees")


@pytest.mark.parametrize(("written", "kind"), [("score", "reward-score"), ("reward-audit", "judge-agreement"),
                                               ("kg", "kg")])
def test_an_older_manifest_names_its_job_pipeline_and_a_former_kind_is_read_as_todays(tmp_path, written, kind):
    (tmp_path / "manifest.json").write_text(json.dumps({"pipeline": written, "status": "complete"}))
    assert job_kind(RunDir(tmp_path, kind).manifest()) == kind
    RunDir(tmp_path, kind).check_kind()  # it resumes
    with pytest.raises(UserError, match="holds an? "):
        RunDir(tmp_path, "tree").check_kind()
    assert is_kg_run(tmp_path) == (kind == "kg")


def test_how_a_job_ends(tmp_path):
    budget = BudgetExceeded("LLM budget reached: spent 120 of the 100 tokens cap", "raise llm.max_tokens")
    assert status_of(None) == "complete" and status_of(budget).startswith("stopped: LLM budget reached")
    assert status_of(UserError("bad input")) == "failed: UserError: bad input"
    assert status_of(ValueError("boom")) == "failed: ValueError: boom" and status_of(KeyboardInterrupt()) == "interrupted"
    assert retryable(ValueError("boom")) and not retryable(UserError("a replay miss")) and not retryable(budget)

    run = RunDir(tmp_path, "tree")
    run.write_manifest("i", "2026-01-01T00:00:00+00:00", "running", {})
    with ending(run, "i") as outcome:  # every job: a budget stop ends the body, not the job
        raise budget
    assert outcome.status.startswith("stopped:") and run.manifest()["status"] == "running"  # the job finishes it
    with pytest.raises(ValueError), ending(run, "i"):
        raise ValueError("boom")
    assert run.manifest()["status"] == "failed: ValueError: boom"


def test_paths_are_resolved_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = on_driver(derive(Config(), "run_dir=runs/x", "tools.index_dir=idx/../index", "llm.cache_path=",
                           "llm.replay_path=rec.jsonl"))
    assert cfg.run_dir == str(tmp_path / "runs" / "x") and cfg.tools.index_dir == str(tmp_path / "index")
    assert cfg.llm.replay_path == str(tmp_path / "rec.jsonl") and cfg.llm.cache_path == ""
    default = on_driver(Config())  # the default index lives under the driver's cache folder
    assert default.tools.index_dir == str(Config().index_dir()) and Path(default.tools.index_dir).is_absolute()


def test_a_log_append_is_fsynced_but_not_on_the_callers_thread(tmp_path, monkeypatch):
    """The caller is the event loop every LLM call waits on; the fsync (about 10 ms) runs on a background thread."""
    import os
    import threading

    from rubricforge.io import stagelog

    synced, real = [], os.fsync
    monkeypatch.setattr(stagelog.os, "fsync", lambda fd: synced.append(threading.get_ident()) or real(fd))
    log = StageLog(tmp_path / "trees.jsonl")
    log.append("t0", {"v": 0})
    assert StageLog(tmp_path / "trees.jsonl").keys() == ["t0"]  # the line is the OS's at once
    stagelog._syncer.submit(lambda: None).result(timeout=10)  # the pending fsync is done after this
    assert synced and threading.get_ident() not in synced
