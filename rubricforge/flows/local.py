"""Running the flows from the command line: ``rubricforge build`` (``--source tree|kg``) and
``rubricforge corpus build``.

Logs go to ``<run_dir>/logs/`` (``verbose``: also to the terminal), Prefect's temporary server is used
when no API is configured, and the user sees the rich progress bar, not Prefect's log lines. User
mistakes (the job's preflight, ``runner.*``) fail before the server starts.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

from rubricforge.config import Config
from rubricforge.flows.session import prefect_api, route_logs
from rubricforge.jobs.base import BUILD_ROLES, JobResult, on_driver, preflight
from rubricforge.jobs.corpus import IndexInfo


def run_build_dataset(cfg: Config, push_to_hub: str | None = None, progress: bool = True, verbose: bool = False) -> JobResult:
    """The ``build_dataset`` flow on ``cfg``, with the progress bar read from the run directory."""
    from rubricforge.jobs.tree import watch

    preflight(cfg, BUILD_ROLES, cfg.run_dir, push_to_hub)
    cfg, invocation = on_driver(cfg), uuid.uuid4().hex[:12]
    with _session(cfg, Path(cfg.run_dir) / "logs", verbose):
        from rubricforge.flows.tree import build_dataset

        with watch(cfg, invocation, cfg.build.tree_cap(), progress):
            return build_dataset(push_to_hub=push_to_hub, invocation=invocation, config=cfg)


def run_build_kg_dataset(cfg: Config, push_to_hub: str | None = None, progress: bool = True, verbose: bool = False) -> JobResult:
    """The ``build_kg_dataset`` flow on ``cfg`` (``rubricforge build --source kg``)."""
    from rubricforge.jobs.kg import kg_config

    preflight(cfg, BUILD_ROLES, kg_config(cfg).run_dir, push_to_hub)
    cfg = kg_config(cfg)
    with _session(cfg, Path(cfg.run_dir) / "logs", verbose):
        from rubricforge.flows.kg import build_kg_dataset

        return build_kg_dataset(push_to_hub=push_to_hub, progress=progress, config=cfg)


def run_index_corpus(cfg: Config, verbose: bool = False) -> IndexInfo:
    """The ``index_corpus`` flow on ``cfg``, with its stages' progress bars."""
    with _session(cfg, cfg.index_dir() / "logs", verbose):
        from rubricforge.flows.corpus import index_corpus

        return index_corpus(progress=True, config=cfg)


def _session(cfg: Config, log_dir: Path, verbose: bool) -> contextlib.AbstractContextManager[str]:
    """Route the logs (before Prefect is imported), check the runner, then the Prefect API to use."""
    route_logs(log_dir, verbose)
    from rubricforge.flows.runners import task_runner

    task_runner(cfg.runner)  # an unreachable address or a missing Ray: one line now, before the server starts
    return prefect_api()
