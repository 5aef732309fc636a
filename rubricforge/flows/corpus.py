"""The ``index_corpus`` flow: load -> chunk (the passage store) -> embed -> index -> meta.json.

Each stage is a task that reuses its previous output when its key is unchanged (see
:mod:`rubricforge.jobs.corpus`), so a re-run after a crash resumes: the store when complete, the
embedding per shard, the index when built.
"""

from __future__ import annotations

import time

from rubricforge.config import Config, load_config
from rubricforge.extras import needs
from rubricforge.flows import prefect_tasks
from rubricforge.jobs.corpus import IndexInfo, index_ready

with needs("flows"):
    from prefect import flow


@flow(name="index_corpus")
def index_corpus(config_path: str | None = None, overrides: list[str] | None = None,
                 progress: bool = False, config: Config | None = None) -> IndexInfo:
    """Build (or finish, or reuse) the index of the configured corpus in ``cfg.index_dir()``.

    Args:
        config_path: A rubricforge YAML config (absolute, or relative to the working directory); none: defaults.
        overrides: ``key=value`` config overrides, as with ``--set`` (e.g. ``corpus.source=jsonl``).
        progress: Show the stages' progress bars on stderr (the CLI does).
        config: A resolved config, used instead of ``config_path`` and ``overrides`` (the CLI passes its own).
    """
    return index_tasks(config if config is not None else load_config(config_path, overrides), progress)


def index_tasks(cfg: Config, progress: bool = False) -> IndexInfo:
    """The four index tasks in turn (inside a flow)."""
    t0 = time.perf_counter()
    stored = prefect_tasks.store(cfg, progress)
    embedded = prefect_tasks.embed(cfg, stored, progress)
    indexed = prefect_tasks.index(cfg, stored, embedded, progress)
    return prefect_tasks.meta(cfg, stored, embedded, indexed, time.perf_counter() - t0)


def ensure_index(cfg: Config) -> None:
    """The index tasks (inside a flow) when the configured index is missing or unfinished."""
    if not index_ready(cfg):
        index_tasks(cfg)
