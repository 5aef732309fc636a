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

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any
from concurrent.futures import ThreadPoolExecutor

from rubricforge.config import Config, load_config
from rubricforge.errors import BudgetExceeded, ItemsFailed, UserError
from rubricforge.extras import needs
from rubricforge.flows import prefect_tasks
from rubricforge.flows.corpus import ensure_index
from rubricforge.flows.limits import ensure_limits, shared
from rubricforge.flows.runners import task_runner
from rubricforge.flows.workers import release
from rubricforge.jobs.base import BUILD_ROLES, JobResult, on_driver, partial_export, preflight
from rubricforge.jobs.tree import (STAGES, BuildPlan, BuildSummary, Seed, StageLog, TreeFailed, export_run,
                                   run_stages)

with needs("flows"):
    from prefect import flow


class PrefectTrees:
    """The trees as Prefect tasks (:func:`~rubricforge.flows.prefect_tasks.tree`, on the flow's task runner, retried by
    Prefect), for the tree job's one admission loop (:func:`~rubricforge.jobs.tree.run_stages`). A task that still
    failed is a :class:`~rubricforge.jobs.tree.TreeFailed` (a budget stop stops the run); the first configuration
    mistake among them is :attr:`mistake`, what the run ends with."""

    logs = None  # the workers write shards: run_stages reads them once, for the finish and the export

    def __init__(self, cfg: Config, invocation: str):
        self.cfg, self.invocation, self.task = cfg, invocation, prefect_tasks.tree_task(cfg)
        self.mistake: UserError | None = None
        self._waits = ThreadPoolExecutor(cfg.build.tree_concurrency, thread_name_prefix="tree-task")

    async def run(self, seed: Seed, stages: Sequence[str] = STAGES) -> bool:
        future = self.task.submit(self.cfg, self.invocation, seed, list(stages))
        # result() waits for the final state; future.state may still lag behind it (seen: a retained tree read False)
        result = await asyncio.get_running_loop().run_in_executor(self._waits, lambda: future.result(
            raise_on_failure=False))
        if isinstance(result, bool):
            return result
        if isinstance(result, BudgetExceeded):
            raise result
        if isinstance(result, UserError) and self.mistake is None:
            self.mistake = result
        raise TreeFailed(seed, result, self.cfg.runner.task_retries)

    async def aclose(self) -> None:
        """Wait for the tasks still running (a run that stopped early lets them finish), then close this process's
        workers of the invocation."""
        def close() -> None:  # off the event loop: closing a worker runs its own
            self._waits.shutdown()
            release(self.invocation)

        await asyncio.to_thread(close)


@flow(name="trees")
def trees(cfg: Config, plan: BuildPlan, stages: list[str]) -> tuple[BuildSummary, dict[str, StageLog[Any]]]:
    """The seeds' trees through ``stages``, one task per tree, as many and as concurrently as the job's admission
    loop allows, then the finish: the summary and the stage logs, read once."""
    if shared(cfg):
        ensure_limits(cfg)
    runner = PrefectTrees(cfg, plan.invocation)
    try:
        return asyncio.run(run_stages(cfg, plan, runner, stages))
    except ItemsFailed:
        if runner.mistake is not None:  # a configuration mistake in a tree: the CLI's exit 2, not a run to retry
            raise runner.mistake from None
        raise


def stage_flow(cfg: Config, stages: list[str], invocation: str | None
               ) -> tuple[BuildSummary, dict[str, StageLog[Any]]]:
    """The index (if missing) -> prepare -> the ``trees`` subflow on the configured runner (with the finish); a
    failed tree ends the run with :class:`~rubricforge.errors.ItemsFailed` naming it, or with the UserError of a
    configuration mistake."""
    ensure_index(cfg)
    plan = prefect_tasks.prepare(cfg, invocation or uuid.uuid4().hex[:12])
    return trees.with_options(task_runner=task_runner(cfg.runner))(cfg, plan, stages)


def resolve(config: Config | None, config_path: str | None, overrides: list[str] | None,
            push_to_hub: str | None = None) -> Config:
    """The flow's config: ``config`` as given (the CLI's, resolved, after the job's preflight ran before Prefect's
    server started), else loaded from the file and overrides (a deployment's) and checked by the job's preflight
    here; so a push is checked once. Its paths made absolute here, on the driver."""
    if config is None:
        config = load_config(config_path, overrides)
        preflight(config, BUILD_ROLES, config.run_dir, push_to_hub)
    return on_driver(config)


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
    cfg = resolve(config, config_path, overrides, push_to_hub)
    with partial_export(lambda: export_run(cfg, None)):  # a failed run's finished rows, marked partial
        summary, logs = stage_flow(cfg, list(STAGES), invocation)
    return prefect_tasks.export_tree_build(cfg, summary, push_to_hub, logs)


@flow(name="build_trees")
def build_trees(config_path: str | None = None, overrides: list[str] | None = None,
                invocation: str | None = None, config: Config | None = None) -> BuildSummary:
    """Stage 1 alone: the evidence trees."""
    return stage_flow(resolve(config, config_path, overrides), ["trees"], invocation)[0]


@flow(name="synthesize")
def synthesize(config_path: str | None = None, overrides: list[str] | None = None,
               invocation: str | None = None, config: Config | None = None) -> BuildSummary:
    """Stage 2 alone: questions and rubrics from finished trees, rule-checked."""
    return stage_flow(resolve(config, config_path, overrides), ["candidates"], invocation)[0]


@flow(name="verify")
def verify(config_path: str | None = None, overrides: list[str] | None = None,
           invocation: str | None = None, config: Config | None = None) -> BuildSummary:
    """Stage 3 alone: the verifier's KEEP / REVISE / DROP for finished candidates."""
    return stage_flow(resolve(config, config_path, overrides), ["verdicts"], invocation)[0]


@flow(name="export_dataset")
def export_dataset(config_path: str | None = None, overrides: list[str] | None = None,
                   push_to_hub: str | None = None, config: Config | None = None) -> JobResult:
    """The export alone: dataset and viewer from what the run directory holds."""
    cfg = resolve(config, config_path, overrides, push_to_hub)
    plan = prefect_tasks.prepare(cfg, None)
    return prefect_tasks.export_tree_build(cfg, prefect_tasks.finish_tree_build(cfg, plan, "complete"), push_to_hub)
