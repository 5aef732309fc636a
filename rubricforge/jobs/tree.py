"""The main job: the evidence-tree stages, then the export — what ``rubricforge build`` runs.

It sits above ``pipelines`` and ``export`` (one direction of dependency): the stages know nothing of
the dataset layout, and the export reads only the run directory the stages wrote. How a run ends
(:mod:`rubricforge.jobs.base`) is decided here, for the in-process run and for the flows alike: both go
through :func:`run_stages` (prepare -> the one admission loop, :func:`~rubricforge.pipelines.tree.run.run_trees`
-> finish); only what runs one tree differs (:class:`Trees`: a :class:`TreeWorker` here, a Prefect task per tree
in :mod:`rubricforge.flows.tree`). The flows take every name they need from this module.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

from rubricforge.config import Config
from rubricforge.errors import ItemsFailed
from rubricforge.jobs.gates import run_gates
from rubricforge.jobs.base import (BUILD_ROLES, JobResult, ending, exported, on_driver, partial_export, preflight,
                                   push_token, retryable)
from rubricforge.llm.errors import Unavailable
from rubricforge.pipelines.tree.run import (JOB_KIND, STAGES, BuildPlan, BuildSummary, TreeWorker, finish_build,
                                            prepare_build, progress_label, run_trees, stage_logs, tree_id_for,
                                            tree_ids)
from rubricforge.pipelines.tree.seeds import Seed
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir
from rubricforge.text import one_line

__all__ = ["STAGES", "BuildPlan", "BuildSummary", "Seed", "StageLog", "TreeFailed", "TreeWorker", "Trees", "build_dataset",
           "export_run", "finish_build", "prepare_build", "run_build", "run_stages", "watch"]


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
        worker = TreeWorker(cfg, plan.invocation, index=index)
        with watch(cfg, plan.invocation, len(plan.seeds), progress):
            return await run_stages(cfg, plan, worker)


def watch(cfg: Config, invocation: str, trees: int, enabled: bool) -> contextlib.AbstractContextManager[None]:
    """The progress bar of a run's first ``trees`` trees, read from the run directory (any executor)."""
    return RunDir(cfg.run_dir, JOB_KIND).watch(progress_label(cfg), "trees", tree_ids(trees), invocation,
                                               also=("candidates", "verdicts"), enabled=enabled)


class Trees(Protocol):
    """What runs one tree through the stages: a :class:`TreeWorker` in this process, or the Prefect executor."""

    @property
    def logs(self) -> dict[str, StageLog[Any]] | None:
        """The stage logs in memory; None: :func:`run_stages` reads them once (and the workers' shards)."""

    async def run(self, seed: Seed, stages: Sequence[str] = STAGES) -> bool: ...

    async def aclose(self) -> None: ...


class TreeFailed(Unavailable):
    """A tree that raised ``error`` for good (after ``attempts`` runs, e.g. a Prefect task's retries): like a tree
    whose LLM calls kept failing, the others go on and the run ends with ItemsFailed naming it."""

    def __init__(self, seed: Seed, error: BaseException, retries: int):
        self.error = error
        attempts = retries + 1 if retryable(error) else 1
        super().__init__(f"{tree_id_for(seed)}: {type(error).__name__}: {one_line(str(error), 300)} "
                         f"(after {attempts} attempt(s))")


async def run_stages(cfg: Config, plan: BuildPlan, trees: Trees, stages: Sequence[str] = STAGES
                     ) -> tuple[BuildSummary, dict[str, StageLog[Any]]]:
    """The plan's trees through ``stages`` by ``trees``, admitted by the one loop, then the finish: the summary
    and the stage logs (the workers' in memory, or read once here with their shards, for the finish and the
    export). A budget stop ends the run ``stopped: <why>``; trees that failed end it with ItemsFailed naming
    them, every other item kept."""
    run_dir, failures = RunDir(plan.run_dir, JOB_KIND), list[str]()
    try:
        with ending(run_dir, plan.invocation) as outcome:
            failures = await run_trees(lambda seed: trees.run(seed, stages), plan.seeds, cfg, stages)
    finally:
        await trees.aclose()
    logs = trees.logs if trees.logs is not None else stage_logs(run_dir)
    if failures:  # trees whose LLM calls kept failing: every other item is kept, a re-run redoes just these
        finish_build(cfg, plan, f"failed: {ItemsFailed(failures)}", logs)
        raise ItemsFailed(failures)
    return finish_build(cfg, plan, outcome.status, logs), logs


def export_run(cfg: Config, summary: BuildSummary | None, push_to_hub: str | None = None,
               logs: dict[str, StageLog[Any]] | None = None) -> JobResult:
    """The quality gates (:func:`~rubricforge.jobs.gates.run_gates`, their LLM calls in the run's ledger), then
    the export of the stages' output in ``cfg.run_dir`` and the viewer (``summary``: None for the partial export
    of a failed run; ``logs``: the stage logs already in memory, else read from the run directory). A push was
    checked by the job's preflight."""
    from rubricforge.export import export_dataset, write_viewer
    from rubricforge.export.run import load_run

    run = load_run(cfg.run_dir, cfg, logs)  # the stage logs read at most once, for the dataset and the viewer
    run_dir = RunDir(cfg.run_dir, JOB_KIND)
    run_gates(cfg, run_dir, [(e.id, e.question, e.rubrics) for e in run.examples], learnability=True)
    run.manifest = run_dir.manifest()  # with the gates' ledger
    if summary is not None:
        summary.ledger = (run.manifest.get("invocations") or [{}])[-1].get("ledger", {}).get("total", summary.ledger)
    export = export_dataset(run, push_to_hub=push_to_hub, token=push_token(push_to_hub))
    return exported(run_dir, summary, export, write_viewer(run))
