"""The flows' Prefect tasks: each calls one job function (the flows only wire them together).

Tree tasks persist their results under ``<run_dir>/prefect/`` with a cache keyed by their inputs and
source (not Prefect's DEFAULT policy, which includes the flow run id), so a finished tree is a cache
hit in any later flow run on the same run directory; the stage logs in the run directory resume the
trees that were in flight. The index stages keep their own keys in the index folder, so their tasks
are not cached by Prefect (a deleted index folder must be rebuilt, not answered from a cache).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.extras import needs
from rubricforge.jobs import corpus
from rubricforge.jobs.base import JobResult, retryable
from rubricforge.jobs.corpus import IndexInfo
from rubricforge.jobs.tree import BuildPlan, BuildSummary, Seed, StageLog, export_run, finish_build, prepare_build

with needs("flows"):
    from prefect import task
    from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

# ---------------------------------------------------------------- corpus indexing


@task(name="load-and-chunk", cache_policy=NO_CACHE)
def store(cfg: Config, progress: bool) -> dict[str, Any]:
    return corpus.store(cfg, progress)


@task(name="embed", cache_policy=NO_CACHE)
def embed(cfg: Config, stored: dict[str, Any], progress: bool) -> dict[str, Any]:
    return corpus.embed(cfg, stored, progress)


@task(name="index", cache_policy=NO_CACHE)
def index(cfg: Config, stored: dict[str, Any], embedded: dict[str, Any], progress: bool) -> dict[str, Any]:
    return corpus.index(cfg, stored, embedded, progress)


@task(name="write-meta", cache_policy=NO_CACHE)
def meta(cfg: Config, stored: dict[str, Any], embedded: dict[str, Any], indexed: dict[str, Any],
         seconds: float) -> IndexInfo:
    return corpus.write_meta(cfg, stored, embedded, indexed, seconds)


# ---------------------------------------------------------------- dataset building


@task(name="prepare", cache_policy=NO_CACHE)
def prepare(cfg: Config, invocation: str | None) -> BuildPlan:
    """The plan of ``invocation``, from the index of this process's worker of it (opened once: the tree tasks on a
    thread runner use it too); None: a plan for no trees (the export alone), from an index opened for it."""
    from rubricforge.flows.workers import worker_for

    return prepare_build(cfg, None if invocation is None else worker_for(cfg, invocation).index, invocation)


@task(name="tree", task_run_name="tree-{seed.index:04d}")
def tree(cfg: Config, invocation: str, seed: Seed, stages: list[str]) -> bool:
    """One seed's tree through ``stages`` on this process's worker; returns whether it is a retained row."""
    from rubricforge.flows.workers import worker_for

    return asyncio.run(worker_for(cfg, invocation).run(seed, stages))


def tree_task(cfg: Config) -> Any:
    """``tree`` with this run's cache location, result storage and retries."""
    prefect_dir = Path(cfg.run_dir).resolve() / "prefect"
    return tree.with_options(
        cache_policy=((INPUTS - "invocation") + TASK_SOURCE).configure(key_storage=prefect_dir / "cache"),
        result_storage=prefect_dir / "results", persist_result=True, retries=cfg.runner.task_retries,
        retry_delay_seconds=cfg.runner.retry_delay_s, retry_condition_fn=retry_condition)


def retry_condition(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition: the job layer's :func:`~rubricforge.jobs.base.retryable`."""
    return retryable(state.result(raise_on_failure=False))


@task(name="finish", cache_policy=NO_CACHE)
def finish_tree_build(cfg: Config, plan: BuildPlan, status: str) -> BuildSummary:
    return finish_build(cfg, plan, status)


@task(name="export", cache_policy=NO_CACHE)
def export_tree_build(cfg: Config, summary: BuildSummary, push_to_hub: str | None,
                      logs: dict[str, StageLog[Any]] | None = None) -> JobResult:
    return export_run(cfg, summary, push_to_hub, logs)
