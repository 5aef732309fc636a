"""Async twins of the job entry points, for notebooks and async trainers.

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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rubricforge.config import Config
    from rubricforge.jobs.base import JobResult
    from rubricforge.jobs.reward_score import ScoreSummary


async def abuild_dataset(cfg: Config, progress: bool = True, push_to_hub: str | None = None) -> JobResult:
    """:func:`rubricforge.jobs.tree.build_dataset` (the evidence-tree dataset), awaitable."""
    from rubricforge.jobs.tree import build_dataset

    return await asyncio.to_thread(build_dataset, cfg, progress, push_to_hub)


async def abuild_kg_dataset(cfg: Config, progress: bool = True, push_to_hub: str | None = None) -> JobResult:
    """:func:`rubricforge.jobs.kg.build_kg_dataset` (the knowledge-graph dataset), awaitable."""
    from rubricforge.jobs.kg import build_kg_dataset

    return await asyncio.to_thread(build_kg_dataset, cfg, progress, push_to_hub)


async def ascore_responses(cfg: Config, dataset: str | Path, responses: str | Path, names: Sequence[str],
                           out: str | Path | None = None, progress: bool = True) -> ScoreSummary:
    """:func:`rubricforge.jobs.reward_score.score_responses` (score a JSONL of responses, resumably), awaitable."""
    from rubricforge.jobs.reward_score import score_responses

    return await asyncio.to_thread(score_responses, cfg, dataset, responses, names, out, progress)
