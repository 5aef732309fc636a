"""The replayed headline build: ``build_two_trees.jsonl`` (recorded by ``tests/jobs/test_build.py --record``), the
settings it was recorded with, configs and CLI arguments that replay it, and readers of its run directory."""

from __future__ import annotations

import json
from pathlib import Path

from rubricforge.config import Config
from support.config import RECORDED_WITH, derive
from support.paths import DATA

RECORDING = DATA / "recordings" / "build_two_trees.jsonl"
# min_rubrics=1: the 0.5B model writes one rubric, so with the paper's 5 no candidate would reach the verifier
SETTINGS = ("build.n_trees=2", "build.max_nodes=5", "build.passages_per_node=2", "build.max_depth=2",
            "build.tree_concurrency=1", "build.min_rubrics=1", "llm.generator.max_tokens=600",
            "llm.verifier.max_tokens=600",
            "build.target_rows=0", "build.check_coverage=false",  # as recorded: a fixed number of trees, no coverage test
            "build.passage_gate=-1")  # and no passage gate (recorded before it; test_passage_gate tests it)
KEEP_ALL = "build.keep_decisions=[KEEP,REVISE,DROP]"  # export every verdict, whatever the recording decided
ROLES = tuple(f"llm.{r}.backend=replay" for r in ("generator", "verifier", "judge"))


def replay(cfg: Config, run_dir: Path, *extra: str, recording: Path = RECORDING) -> Config:
    """``cfg`` with every role answering from ``recording``, no LLM cache, the recording's settings."""
    return derive(cfg, *SETTINGS, *ROLES, f"llm.replay_path={recording}", "llm.cache_path=", f"run_dir={run_dir}",
                  *extra)


def replay_args(small_index_cfg: Config, recording: Path = RECORDING) -> list[str]:
    """The same as ``--set`` arguments of ``rubricforge build`` (over the session's small index)."""
    sets = [*RECORDED_WITH, *SETTINGS, *ROLES, f"llm.replay_path={recording}", "llm.cache_path=", "corpus.source=jsonl",
            f"corpus.path={small_index_cfg.corpus.path}", "corpus.fields.topic=topic",
            f"tools.index_dir={small_index_cfg.tools.index_dir}", "runner.retry_delay_s=0"]
    return [arg for item in sets for arg in ("--set", item)]


def first_tree_recording(small_index_cfg: Config, tmp_path: Path) -> Path:
    """A recording of tree 0's answers only: tree 1's first call finds no answer (a configuration mistake: a UserError)."""
    from rubricforge.jobs.tree import build_dataset

    one = tmp_path / "tree0.jsonl"
    build_dataset(replay(small_index_cfg, tmp_path / "record", "build.n_trees=1", f"llm.record_path={one}"),
                  progress=False)
    return one


def lines(run_dir: Path, name: str) -> list[str]:
    """The lines of the stage log ``name`` (``trees``, ``candidates``, ``verdicts``); [] when there is none."""
    path = run_dir / f"{name}.jsonl"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def keys(run_dir: Path, name: str) -> list[str]:
    return [json.loads(line)["key"] for line in lines(run_dir, name)]


def rows(dataset_dir: str | Path) -> list[dict]:
    """The exported dataset's rows, by id."""
    data = [json.loads(x) for x in (Path(dataset_dir) / "data.jsonl").read_text().splitlines()]
    return sorted(data, key=lambda r: r["id"])
