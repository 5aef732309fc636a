"""The dataset flows: ``build_dataset`` (seed topics -> evidence trees -> synthesis -> rule checks ->
verification -> export) and one flow per stage (``build_trees``, ``synthesize``, ``verify``,
``export_dataset``) so a stage can be run alone on a run directory.

Every flow takes the config as a deployment would: ``config_path`` (a YAML file) and ``overrides``
(``key=value`` items, as ``--set``); the environment applies as for the CLI. A caller that holds a
resolved config (the CLI) passes it as ``config`` instead, so it is not loaded again. Trees run as one
task each in the ``trees`` subflow, whose task runner is ``runner.kind``, at most
``build.tree_concurrency`` at a time, until ``build.target_rows`` rows are retained (``TreeQuota``). A
tree whose task still fails after ``runner.task_retries`` retries (none after a budget stop:
:func:`rubricforge.jobs.base.retryable`) is named in the one-line reason the flow run fails with; every
finished item stays in the run directory and the same flow resumes from it.
"""

from __future__ import annotations

from typing import Any

from rubricforge.config import Config, load_config
from rubricforge.corpora.indexing import index_ready
from rubricforge.extras import needs
from rubricforge.flows import tasks
from rubricforge.flows.corpus import index_tasks
from rubricforge.flows.limits import ensure_limits, shared
from rubricforge.flows.runners import task_runner
from rubricforge.flows.workers import release
from rubricforge.jobs.base import JobResult, check_push, on_driver, partial_export
from rubricforge.jobs.tree import TreeOutcome, export_run, run_status, tree_outcome
from rubricforge.pipelines.tree.run import STAGES, BuildPlan, BuildSummary, TreeQuota, tree_id_for

with needs("flows"):
    from prefect import flow
    from prefect.futures import as_completed, wait


@flow(name="trees")
def trees(cfg: Config, plan: BuildPlan, stages: list[str]) -> list[TreeOutcome]:
    """The seeds' trees through ``stages``, one task per tree, as many and as concurrently as
    :class:`~rubricforge.pipelines.tree.run.TreeQuota` allows."""
    if shared(cfg):
        ensure_limits(cfg)
    task, quota = tasks.tree_task(cfg), TreeQuota(cfg, stages)
    futures: list[Any] = []
    running: set[Any] = set()

    def settle() -> None:
        done = next(as_completed(list(running)))
        running.remove(done)
        # result() waits for the final state; done.state may still lag behind it (seen: a retained tree read False)
        result = done.result(raise_on_failure=False)
        quota.finished(result if isinstance(result, bool) else None)

    for seed in plan.seeds:
        while running and not quota.may_start(len(running)):
            settle()
        if not quota.may_start(len(running)):
            break
        quota.start()
        futures.append(task.submit(cfg, plan.invocation, seed, stages))
        running.add(futures[-1])
    wait(futures)
    release(plan.invocation)
    return [tree_outcome(tree_id_for(seed), None if f.state.is_completed() else f.state.result(raise_on_failure=False),
                         cfg.runner.task_retries) for seed, f in zip(plan.seeds, futures, strict=False)]


def run_stages(cfg: Config, stages: list[str], invocation: str | None) -> BuildSummary:
    """prepare -> the ``trees`` subflow on the configured runner -> finish; a failed tree ends the run with
    :class:`~rubricforge.errors.ItemsFailed` naming it, or with the UserError of a configuration mistake."""
    if not index_ready(cfg):
        index_tasks(cfg)
    plan = tasks.prepare(cfg, invocation)
    outcomes = trees.with_options(task_runner=task_runner(cfg.runner))(cfg, plan, stages)
    status, failure = run_status(outcomes)
    summary = tasks.finish(cfg, plan, status)
    if failure:
        raise failure
    return summary


def resolve(config: Config | None, config_path: str | None, overrides: list[str] | None) -> Config:
    """The flow's config: ``config`` as given (the CLI's, already resolved), else loaded from the file and
    overrides (a deployment's); its paths made absolute here, on the driver."""
    return on_driver(config if config is not None else load_config(config_path, overrides))


@flow(name="build_dataset")
def build_dataset(config_path: str | None = None, overrides: list[str] | None = None,
                  push_to_hub: str | None = None, invocation: str | None = None,
                  config: Config | None = None) -> JobResult:
    """The whole main job: index (if missing), trees, synthesis, rule checks, verification, export.

    Args:
        config_path: A rubricforge YAML config (absolute, or relative to the working directory); none: defaults.
        overrides: ``key=value`` config overrides, as with ``--set`` (e.g. ``build.n_trees=20``, ``runner.kind=dask``).
        push_to_hub: Also push the dataset to this Hugging Face Hub repo (token from HF_TOKEN).
        invocation: An id for this run's ledger files (the CLI's progress bar reads them); default: a new one.
        config: A resolved config, used instead of ``config_path`` and ``overrides`` (the CLI passes its own).
    """
    cfg = resolve(config, config_path, overrides)
    check_push(push_to_hub)
    with partial_export(lambda: export_run(cfg, None)):  # a failed run's finished rows, marked partial
        summary = run_stages(cfg, list(STAGES), invocation)
    return tasks.export(cfg, summary, push_to_hub)


@flow(name="build_trees")
def build_trees(config_path: str | None = None, overrides: list[str] | None = None,
                invocation: str | None = None, config: Config | None = None) -> BuildSummary:
    """Stage 1 alone: the evidence trees."""
    return run_stages(resolve(config, config_path, overrides), ["trees"], invocation)


@flow(name="synthesize")
def synthesize(config_path: str | None = None, overrides: list[str] | None = None,
               invocation: str | None = None, config: Config | None = None) -> BuildSummary:
    """Stage 2 alone: questions and rubrics from finished trees, rule-checked."""
    return run_stages(resolve(config, config_path, overrides), ["candidates"], invocation)


@flow(name="verify")
def verify(config_path: str | None = None, overrides: list[str] | None = None,
           invocation: str | None = None, config: Config | None = None) -> BuildSummary:
    """Stage 3 alone: the verifier's KEEP / REVISE / DROP for finished candidates."""
    return run_stages(resolve(config, config_path, overrides), ["verdicts"], invocation)


@flow(name="export_dataset")
def export_dataset(config_path: str | None = None, overrides: list[str] | None = None,
                   push_to_hub: str | None = None, config: Config | None = None) -> JobResult:
    """The export alone: dataset and viewer from what the run directory holds."""
    cfg = resolve(config, config_path, overrides)
    check_push(push_to_hub)
    plan = tasks.prepare(cfg, None)
    return tasks.export(cfg, tasks.finish(cfg, plan, "complete"), push_to_hub)
