"""The main job against a faulty OpenAI-compatible server: transient failures are not finished work.

The fake model (``tests/pipeline_fake.py``) answers from the prompt alone, so two runs over the same trees
get the same answers; :class:`Faulty` injects 429 / 500 / 503 / empty ``choices`` / dropped connections.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import derive
from llm_fakes import FakeOpenAI, litellm_llm_config
from pipeline_fake import Faulty, pipeline_answer
from rubricforge.config import Config
from rubricforge.errors import ItemsFailed
from rubricforge.jobs.tree import build_dataset
from rubricforge.rundir import StageLog

N_TREES = 3


def _cfg(base: Config, tmp_path, server: FakeOpenAI, run: str) -> Config:
    # the fake model's question asks about "facets that remain open", which no rubric checks: no coverage test here
    data = derive(base, f"run_dir={tmp_path / run}", f"build.n_trees={N_TREES}", "build.max_nodes=4",
                  "build.tree_concurrency=3", "build.check_coverage=false").model_dump(mode="json")
    data["llm"] = {**data["llm"], **litellm_llm_config(tmp_path, server, max_retries=1, concurrency=8)}
    return Config.model_validate(data)


def _rows(result) -> list[dict]:
    lines = (Path(result.dataset_dir) / "data.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["id"])


def test_faults_then_a_healthy_rerun_give_the_clean_runs_dataset(small_index_cfg, tmp_path):
    with FakeOpenAI(responder=pipeline_answer, keep_requests=False) as healthy:
        clean = build_dataset(_cfg(small_index_cfg, tmp_path / "clean", healthy, "run"), progress=False)
    assert clean.rows == N_TREES

    faulty = Faulty(rate=0.5, seed=3)
    with FakeOpenAI(responder=faulty, keep_requests=False) as server:
        cfg = _cfg(small_index_cfg, tmp_path / "faulty", server, "run")
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
