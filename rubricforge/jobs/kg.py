"""The KG job: the knowledge-graph stages, then the export and the viewer — what
``rubricforge build --source kg`` runs, and the function a Prefect flow calls for KG data.

Like :mod:`rubricforge.jobs.tree` it sits above ``pipelines`` and ``export``. Without an explicit run
directory (``run_dir`` left at the default ``runs/default``) it writes to ``runs/kg``, so the
evidence-tree run and the KG run never share a folder. A budget stop ends the stages ``stopped: <why>``
and the finished examples are exported, as in every job (:mod:`rubricforge.jobs.base`); a user error or
items whose LLM calls kept failing (:class:`~rubricforge.errors.ItemsFailed`) end the run with its
manifest saying so (``failed: ...``) and raise. Finished work is kept either way.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rubricforge.config import Config
from rubricforge.jobs.base import BUILD_ROLES, JobResult, ending, exported, on_driver, preflight, push_token
from rubricforge.jobs.gates import run_gates
from rubricforge.pipelines.kg.run import JOB_KIND, KGRun, KGSummary
from rubricforge.rundir import RunDir

DEFAULT_KG_RUN_DIR = "runs/kg"


def build_kg_dataset(cfg: Config, progress: bool = True, push_to_hub: str | None = None) -> JobResult:
    """Run (or resume) the KG stages, export the dataset and write the viewer (configuration mistakes end before
    any work: :func:`~rubricforge.jobs.base.preflight`)."""
    preflight(cfg, BUILD_ROLES, kg_config(cfg).run_dir, push_to_hub)
    cfg = kg_config(cfg)
    return export_kg_run(cfg, run_kg(cfg, progress=progress), push_to_hub)


def kg_config(cfg: Config) -> Config:
    """``cfg`` with the KG run directory when none was chosen, its paths resolved here (the driver)."""
    if cfg.run_dir == Config.model_fields["run_dir"].default:
        cfg = cfg.model_copy(update={"run_dir": DEFAULT_KG_RUN_DIR})
    return on_driver(cfg)


def run_kg(cfg: Config, progress: bool = True) -> KGSummary:
    """Run (or resume) the KG stages in ``cfg.run_dir`` (see :mod:`rubricforge.pipelines.kg.run`)."""
    return asyncio.run(_run_kg(on_driver(cfg), progress))


async def _run_kg(cfg: Config, progress: bool) -> KGSummary:
    run = KGRun(cfg, progress)
    async with run.session():
        with ending(run.run_dir, run.invocation) as outcome:
            await run.stages()
    return run.finish(outcome.status)


def export_kg_run(cfg: Config, summary: KGSummary, push_to_hub: str | None = None) -> JobResult:
    """The quality gates (:func:`~rubricforge.jobs.gates.run_gates`), then the export of the KG stages' output in
    ``summary.run_dir`` and the subgraph viewer (a push was checked by the job's preflight)."""
    from rubricforge.export.kg import export_kg_dataset, read_examples
    from rubricforge.export.kg_viewer import write_kg_viewer

    examples = read_examples(Path(summary.run_dir))
    run_gates(cfg, RunDir(summary.run_dir, JOB_KIND), [(e.id, e.question, []) for e in examples])
    export = export_kg_dataset(summary.run_dir, cfg, push_to_hub, examples, push_token(push_to_hub))
    return exported(RunDir(summary.run_dir, JOB_KIND), summary, export, write_kg_viewer(summary.run_dir))
