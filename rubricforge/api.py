"""The Python API's ways to run a job: :func:`run_job` (the one way, in this process or under Prefect, that
the CLI uses too) and the async twins of the job entry points, for notebooks and async trainers.

A job runs its own event loop (``asyncio.run``), which cannot start inside a running one (a Jupyter cell,
an async trainer). Each twin runs the job in a worker thread with :func:`asyncio.to_thread` and awaits it,
so the caller's loop keeps running; the result, a :class:`~rubricforge.errors.UserError` or any other
exception comes back as the synchronous function's would. Cancelling the await does not stop the job's
thread: it finishes (and resumes later as usual).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rubricforge.errors import UserError

if TYPE_CHECKING:
    from rubricforge.config import Config
    from rubricforge.jobs.base import JobResult


Executor = Literal["local", "prefect"]
DATASET_JOBS = ("tree", "kg")


def run_job(job: str, cfg: Config, executor: Executor = "local", progress: bool = True,
            push_to_hub: str | None = None, verbose: bool = False) -> JobResult:
    """Run (or resume) the dataset job ``job`` on ``cfg`` and export it: ``tree`` (the evidence-tree dataset,
    :func:`rubricforge.jobs.tree.build_dataset`) or ``kg`` (the knowledge-graph one,
    :func:`rubricforge.jobs.kg.build_kg_dataset`).

    ``executor``: ``local`` runs the job in this process; ``prefect`` runs its Prefect flow (:mod:`rubricforge.flows`,
    imported only then), its tasks on ``runner.*``, Prefect's logs in the run directory (``verbose``: on the
    terminal too) and Prefect's temporary server unless ``PREFECT_API_URL`` is set. Either way the job decides
    how the run ends (:mod:`rubricforge.jobs.base`): the same run directory, status and :class:`JobResult`.
    """
    if job not in DATASET_JOBS:
        raise UserError(f"unknown dataset job '{job}'", f"use one of: {', '.join(DATASET_JOBS)}")
    if executor not in ("local", "prefect"):
        raise UserError(f"unknown executor '{executor}'", "use local (this process) or prefect (the job's flow)")
    if executor == "prefect":
        from rubricforge.flows import local

        run = local.run_build_dataset if job == "tree" else local.run_build_kg_dataset
        return run(cfg, push_to_hub, progress=progress, verbose=verbose)
    from rubricforge.jobs.kg import build_kg_dataset
    from rubricforge.jobs.tree import build_dataset

    return (build_dataset if job == "tree" else build_kg_dataset)(cfg, progress, push_to_hub)


async def abuild_dataset(cfg: Config, progress: bool = True, push_to_hub: str | None = None,
                         executor: Executor = "local") -> JobResult:
    """:func:`run_job` of the evidence-tree dataset, awaitable."""
    return await asyncio.to_thread(run_job, "tree", cfg, executor, progress, push_to_hub)


async def abuild_kg_dataset(cfg: Config, progress: bool = True, push_to_hub: str | None = None,
                            executor: Executor = "local") -> JobResult:
    """:func:`run_job` of the knowledge-graph dataset, awaitable."""
    return await asyncio.to_thread(run_job, "kg", cfg, executor, progress, push_to_hub)


async def ascore_responses(cfg: Config, dataset: str | Path, responses: str | Path, names: Sequence[str],
                           out: str | Path | None = None, progress: bool = True) -> JobResult:
    """:func:`rubricforge.jobs.reward_score.score_responses` (score a JSONL of responses, resumably), awaitable."""
    from rubricforge.jobs.reward_score import score_responses

    return await asyncio.to_thread(score_responses, cfg, dataset, responses, names, out, progress)
