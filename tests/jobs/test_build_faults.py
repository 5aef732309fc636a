"""The main job against a faulty OpenAI-compatible server: transient failures are not finished work.

The fake model (``tests/support/pipeline_fake.py``) answers from the prompt alone, so two runs over the same trees
get the same answers; :class:`Faulty` injects 429 / 500 / 503 / empty ``choices`` / dropped connections.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubricforge.errors import ItemsFailed
from rubricforge.jobs.tree import build_dataset
from rubricforge.io.stagelog import StageLog
from rubricforge.testing import FakeOpenAI
from support.config import derive
from support.pipeline_fake import N_TREES, CutOneRoot, Faulty, pipeline_answer, pipeline_cfg


def _rows(result) -> list[dict]:
    lines = (Path(result.out) / "data.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["id"])


def test_faults_then_a_healthy_rerun_give_the_clean_runs_dataset(small_index_cfg, tmp_path):
    with FakeOpenAI(responder=pipeline_answer, keep_requests=False) as healthy:
        clean = build_dataset(pipeline_cfg(small_index_cfg, tmp_path / "clean", healthy, "run"), progress=False)
    assert clean.rows == N_TREES

    faulty = Faulty(rate=0.5, seed=3)
    with FakeOpenAI(responder=faulty, keep_requests=False) as server:
        cfg = pipeline_cfg(small_index_cfg, tmp_path / "faulty", server, "run")
        with pytest.raises(ItemsFailed) as err:
            build_dataset(cfg, progress=False)
        line = str(err.value)
        assert faulty.faults > 0 and "\n" not in line
        assert line.startswith(f"{len(err.value.errors)} items failed; re-run the same command to retry them")
        logged = {name: StageLog(tmp_path / "faulty" / "run" / f"{name}.jsonl") for name in ("trees", "verdicts")}
        # no failed call became a finished record: every logged tree has no failed-call note or drop
        for record in logged["trees"].records():
            tree = record["tree"]
            assert not any("failed" in note for n in tree["nodes"].values() for note in n["notes"])
            assert not any(d["reason"] == "ground_failed" for d in tree["dropped"])
        assert all(r["verification"]["decision"] != "UNPARSEABLE" for r in logged["verdicts"].records())
        done_before = {name: set(log._done) for name, log in logged.items()}
        assert len(done_before["verdicts"]) + len(err.value.errors) == N_TREES

        faulty.rate = 0.0  # the provider recovers; the same command redoes exactly the failed items
        n_before = server.n_requests
        resumed = build_dataset(cfg, progress=False)
        logs_after = {name: StageLog(tmp_path / "faulty" / "run" / f"{name}.jsonl") for name in ("trees", "verdicts")}
        assert resumed.summary.computed_now.get("verdicts", 0) == len(err.value.errors)
        assert all(done_before[name] <= set(log._done) for name, log in logs_after.items())  # finished work kept
        assert server.n_requests > n_before
    assert resumed.rows == clean.rows
    assert _rows(resumed) == _rows(clean)


def test_a_tree_cut_by_invalid_answers_fails_the_run_exports_the_rest_as_partial_then_is_rebuilt(small_index_cfg,
                                                                                                 tmp_path):
    cut = CutOneRoot(bad_seeds={0})
    with FakeOpenAI(responder=cut, keep_requests=False) as server:
        cfg = derive(pipeline_cfg(small_index_cfg, tmp_path, server, "run"), "build.n_trees=2")
        with pytest.raises(ItemsFailed) as err:
            build_dataset(cfg, progress=False)
        line = str(err.value)
        assert cut.invalid == 3  # the answer and its two re-prompts
        assert "1 items failed" in line and "1 invalid model answer(s) cut the tree (build 1 of 3)" in line
        dataset = tmp_path / "run" / "dataset"
        assert line.endswith(f"the 1 finished row(s) are exported, marked partial: {dataset}")
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"].startswith("failed:") and manifest["dataset_partial"] is True
        stats = json.loads((dataset / "stats.json").read_text())
        assert stats["partial"].startswith("failed:") and stats["counts"]["retained"] == 1
        assert (stats["counts"]["cut_trees"], stats["counts"]["invalid_answers"]) == (1, 1)
        assert "**Partial export.**" in (dataset / "README.md").read_text()
        trees = {r["key"]: r["tree"] for r in StageLog(tmp_path / "run" / "trees.jsonl").records()}
        cut_id = next(k for k, t in trees.items() if t["invalid_answers"])
        assert len(trees[cut_id]["nodes"]) == 1 and trees[cut_id]["attempt"] == 0
        assert not any(r["key"].startswith(cut_id) for r in StageLog(tmp_path / "run" / "candidates.jsonl").records())

        cut.seeds.clear()  # the same command: the cut tree is built again, its uncached calls with another seed
        resumed = build_dataset(cfg, progress=False)
    assert resumed.summary.status == "complete" and resumed.rows == 2
    assert (resumed.summary.cut_trees, resumed.summary.computed_now["trees"]) == (0, 1)
    stage1 = ("Statements", "SentenceSelection", "Proposal", "Ground")
    assert {seed for name, seed in cut.seeds if name.startswith(stage1)} == {1}  # the root's extraction: cached
    assert {seed for name, seed in cut.seeds if not name.startswith(stage1)} == {0}  # merge and verdict as set
    rebuilt = StageLog(tmp_path / "run" / "trees.jsonl").get(cut_id)
    assert rebuilt["tree"]["invalid_answers"] == 0 and rebuilt["tree"]["attempt"] == 1
    assert len(rebuilt["tree"]["nodes"]) > 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["dataset_partial"] is False and json.loads((Path(resumed.out) / "stats.json").read_text(
        ))["partial"] is None


@pytest.mark.parametrize("drop", [False, True])
def test_a_tree_still_cut_after_its_rebuilds_is_counted_and_kept_or_dropped(small_index_cfg, tmp_path, drop):
    cut = CutOneRoot(bad_seeds={0, 1})
    with FakeOpenAI(responder=cut, keep_requests=False) as server:
        cfg = derive(pipeline_cfg(small_index_cfg, tmp_path, server, "run"), "build.n_trees=2",
                     "build.invalid_answer_retries=1", f"build.drop_incomplete_trees={str(drop).lower()}")
        with pytest.raises(ItemsFailed):
            build_dataset(cfg, progress=False)
        result = build_dataset(cfg, progress=False)  # the rebuild is cut again: no more retries, the run completes
    s = result.summary
    assert s.status == "complete" and (s.cut_trees, s.invalid_answers) == (1, 1) and cut.invalid == 6
    assert "cut 1 by 1 invalid answers" in s.lines()[0]
    assert any("still cut by invalid model answers after 1 rebuild(s)" in w for w in s.warnings)
    candidates = {c["candidate"]["tree_id"]: c["candidate"] for c in StageLog(tmp_path / "run" / "candidates.jsonl").records()}
    cut_tree = next(t["key"] for t in StageLog(tmp_path / "run" / "trees.jsonl").records() if t["tree"]["invalid_answers"])
    dropped = any("build.drop_incomplete_trees" in f for f in candidates[cut_tree]["rule_failures"])
    assert dropped is drop
