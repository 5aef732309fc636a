"""The 200-article index of the tool and server tests (real embeddings, real FAISS), built on first use in the
session's temporary folder and reused on disk after, and two of its documents."""

from __future__ import annotations

import pytest

from rubricforge.config import Config, load_config

BAYEUX = "wiki-00071"  # "Bayeux Tapestry" in the packaged corpus
ENGLISH_LIT = "wiki-00200"  # "English literature": the one article of the slice chunked in two passages


def wiki_index_cfg(tmp_path_factory: pytest.TempPathFactory) -> Config:
    """A config over the session's 200-article index; built on first use, reused (on disk) after."""
    from rubricforge.corpora.indexing import build_index

    root = tmp_path_factory.getbasetemp() / "tools-wiki-index"
    cfg = load_config(None, ["corpus.limit=200", f"tools.index_dir={root}", "tools.top_k=3"], environ={})
    build_index(cfg, progress=False)
    return cfg


def with_tools(cfg: Config, **tools: object) -> Config:
    return cfg.model_copy(update={"tools": cfg.tools.model_copy(update=tools)})
