"""The corpus index job: load and chunk (the passage store) -> embed -> index -> ``meta.json``, each stage with its
progress bar. :func:`rubricforge.corpora.indexing.build_index` runs the stages in this process; the
``index_corpus`` flow (:mod:`rubricforge.flows.corpus`) runs each as a task and takes every name it needs from
this module. Each stage reuses its previous output when its key is unchanged, so a re-run after a crash resumes.
"""

from __future__ import annotations

from typing import Any

from rubricforge.config import Config
from rubricforge.corpora.indexing import IndexInfo, embed_stage, index_ready, index_stage, store_stage, write_meta
from rubricforge.io.progress import StageBar

__all__ = ["IndexInfo", "embed", "index", "index_ready", "store", "write_meta"]


def store(cfg: Config, progress: bool) -> dict[str, Any]:
    with StageBar(progress) as bar:
        return store_stage(cfg, bar)


def embed(cfg: Config, stored: dict[str, Any], progress: bool) -> dict[str, Any]:
    with StageBar(progress) as bar:
        return embed_stage(cfg, stored, bar)


def index(cfg: Config, stored: dict[str, Any], embedded: dict[str, Any], progress: bool) -> dict[str, Any]:
    with StageBar(progress) as bar:
        return index_stage(cfg, stored, embedded, bar)
