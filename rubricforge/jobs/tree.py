"""The main job: the evidence-tree stages, then the export — what ``rubricforge build`` runs.

It sits above ``pipelines`` and ``export`` (one direction of dependency): the stages know nothing of
the dataset layout, and the export reads only the run directory the stages wrote. How a run ends
(:mod:`rubricforge.jobs.base`) is decided here, for the in-process run and for the flows alike.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import ItemsFailed, UserError
from rubricforge.jobs.base import (BUILD_ROLES, JobResult, ending, exported, on_driver, partial_export, preflight,
                                   retryable, status_of)
from rubricforge.pipelines.tree.run import (PIPELINE, BuildSummary, TreeWorker, finish_build, prepare_build,
                                            progress_label, run_trees, tree_ids)
from rubricforge.rundir import RunDir, StageLog
from rubricforge.text import one_line


def build_dataset(cfg: Config, progress: bool = True, push_to_hub: str | None = None) -> JobResult:
    """Run (or resume) the stages in ``cfg.run_dir`` in this process, export the dataset and write the
    viewer (the rows of a run that failed are exported too, marked partial, and not pushed). (``rubricforge
    build`` runs the same parts as a Prefect flow: :mod:`rubricforge.flows`.) Configuration mistakes end
    before any work (:func:`~rubricforge.jobs.base.preflight`)."""
    preflight(cfg, BUILD_ROLES, cfg.run_dir, push_to_hub)
    cfg = on_driver(cfg)
    with partial_export(lambda: export_run(cfg, None)):
        summary, logs = asyncio.run(_run_build(cfg, progress))
    return export_run(cfg, summary, push_to_hub, logs)


def run_build(cfg: Config, progress: bool = True) -> BuildSummary:
    """Run (or resume) stages 1–3 in ``cfg.run_dir`` in this process, until ``build.target_rows`` rows are
    retained (:class:`~rubricforge.pipelines.tree.run.TreeQuota`). A budget stop ends the run
    ``stopped: <why>`` with everything finished kept."""
    return asyncio.run(_run_build(on_driver(cfg), progress))[0]


async def _run_build(cfg: Config, progress: bool) -> tuple[BuildSummary, dict[str, StageLog[Any]]]:
    """The summary, and the stage logs as the run left them (read once, at the start, for the finish and the
    export)."""
    from rubricforge.corpora.indexing import open_index

    with open_index(cfg, progress) as index:
        plan = prepare_build(cfg, index)
        run_dir = RunDir(plan.run_dir, PIPELINE)
        worker = TreeWorker(cfg, plan.invocation, index=index)
        failures: list[str] = []
        try:
            with run_dir.watch(progress_label(cfg), "trees", tree_ids(len(plan.seeds)), plan.invocation,
                               also=("candidates", "verdicts"), enabled=progress), \
                    ending(run_dir, plan.invocation) as outcome:
                failures = await run_trees(worker, plan.seeds, cfg)
        finally:
            await worker.aclose()
    if failures:  # trees whose LLM calls kept failing: every other item is kept, a re-run redoes just these
        finish_build(cfg, plan, f"failed: {ItemsFailed(failures)}", worker.logs)
        raise ItemsFailed(failures)
    return finish_build(cfg, plan, outcome.status, worker.logs), worker.logs


@dataclass
class TreeOutcome:
    """How one tree task of a flow ended (``attempts``: how many times it ran; ``error``: what it raised)."""

    tree_id: str
    status: str
    attempts: int = 1
    error: BaseException | None = None


def tree_outcome(tree_id: str, error: BaseException | None, retries: int) -> TreeOutcome:
    return TreeOutcome(tree_id, status_of(error), retries + 1 if error is not None and retryable(error) else 1, error)


def run_status(outcomes: list[TreeOutcome]) -> tuple[str, Exception | None]:
    """A flow run's status from its trees' outcomes, and what to end the run with when a tree failed: the
    UserError of a configuration mistake (the CLI's exit 2), else ItemsFailed naming the failed trees."""
    failed = [o for o in outcomes if o.status.startswith("failed")]
    if not failed:
        return next((o.status for o in outcomes if o.status != "complete"), "complete"), None
    items = ItemsFailed([f"{o.tree_id}: {type(o.error).__name__}: {one_line(str(o.error), 300)} "
                         f"(after {o.attempts} attempt(s))" for o in failed])
    user = next((o.error for o in failed if isinstance(o.error, UserError)), None)
    return f"failed: {items}", user or items


def export_run(cfg: Config, summary: BuildSummary | None, push_to_hub: str | None = None,
               logs: dict[str, StageLog[Any]] | None = None) -> JobResult:
    """Export the stages' output in ``cfg.run_dir`` and write the viewer (``summary``: None for the partial
    export of a failed run; ``logs``: the stage logs already in memory, else read from the run directory)."""
    from rubricforge.export import export_dataset, write_viewer
    from rubricforge.export.run import load_run

    run = load_run(cfg.run_dir, cfg, logs)  # the stage logs read at most once, for the dataset and the viewer
    export = export_dataset(run, push_to_hub=push_to_hub)
    return exported(RunDir(cfg.run_dir, PIPELINE), summary, export, write_viewer(run))
