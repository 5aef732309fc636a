"""The KG dataset flow: ``build_kg_dataset`` (corpus index if missing -> graph -> subgraph sampling ->
questions -> filters -> long-form variants, then export and viewer).

The KG stages are one task (:func:`rubricforge.jobs.kg.run_kg`: it resumes from the run directory,
subgraph by subgraph, so a retried or re-run task redoes only what is missing), retried unless it raised
a configuration mistake (a budget stop is no error: the task returns what is finished, and it is
exported); the export is another. Parameters as for ``build_dataset``.
"""

from __future__ import annotations

from rubricforge.config import Config, load_config
from rubricforge.extras import needs
from rubricforge.flows.prefect_tasks import retry_condition
from rubricforge.jobs.base import BUILD_ROLES, JobResult, preflight
from rubricforge.jobs.kg import KGSummary, export_kg_run, kg_config, run_kg

with needs("flows"):
    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE


@task(name="kg-stages", cache_policy=NO_CACHE, retry_condition_fn=retry_condition)
def stages(cfg: Config, progress: bool) -> KGSummary:
    return run_kg(cfg, progress=progress)


@task(name="kg-export", cache_policy=NO_CACHE)
def export_kg_build(cfg: Config, summary: KGSummary, push_to_hub: str | None) -> JobResult:
    return export_kg_run(cfg, summary, push_to_hub)


@flow(name="build_kg_dataset")
def build_kg_dataset(config_path: str | None = None, overrides: list[str] | None = None,
                     push_to_hub: str | None = None, progress: bool = False,
                     config: Config | None = None) -> JobResult:
    """Knowledge-graph multi-hop questions with answers, entity sets, difficulty and RACE rubrics.

    Args:
        config_path: A rubricforge YAML config (absolute, or relative to the working directory); none: defaults.
        overrides: ``key=value`` config overrides, as with ``--set`` (e.g. ``kg.n_paths=20``).
        push_to_hub: Also push the dataset to this Hugging Face Hub repo (token from HF_TOKEN).
        progress: Show the KG progress bar (the CLI's terminal).
        config: A resolved config, used instead of ``config_path`` and ``overrides`` (the CLI passes its own).
    """
    if config is None:  # a deployment's: the job's preflight (the CLI ran it before Prefect's server started)
        config = load_config(config_path, overrides)
        preflight(config, BUILD_ROLES, kg_config(config).run_dir, push_to_hub)
    cfg = kg_config(config)
    retried = stages.with_options(retries=cfg.runner.task_retries)
    return export_kg_build(cfg, retried(cfg, progress), push_to_hub)
