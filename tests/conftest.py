"""Shared fixtures.

``small_index_cfg``: a real corpus index (real embeddings, real FAISS) over 300 documents of the
default corpus — the first 25 of each of its 12 topic labels, in file order — built once per session
in a temporary folder. The returned config points ``tools.index_dir`` at it, reads the corpus as JSONL
(with the ``topic`` label mapped to metadata), and keeps the LLM cache and the run directory in the
session's temporary folder. Derive per-test configs with :func:`support.config.derive`.

``tiny_model``: the tiny local Qwen2 model of the training tests, built once per session.
Helpers that are not fixtures live in ``tests/support/``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from rubricforge.config import Config
from support.config import RECORDED_WITH, derive, write_small_corpus
from support.llm_fakes import VIA_LITELLM
from support.paths import DATA

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if worker := os.environ.get("PYTEST_XDIST_WORKER"):  # `pytest -n`: each worker its own Prefect database
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix=f"rubricforge-prefect-{worker}-"))


@pytest.fixture(scope="session")
def small_index_cfg(tmp_path_factory) -> Config:
    from rubricforge.corpora.indexing import build_index

    root = tmp_path_factory.mktemp("small-index")
    corpus = write_small_corpus(root / "corpus.jsonl")
    cfg = derive(Config(), "corpus.source=jsonl", f"corpus.path={corpus}", "corpus.fields.topic=topic",
                 f"tools.index_dir={root / 'index'}", f"llm.cache_path={root / 'llm-cache.sqlite'}",
                 f"run_dir={root / 'run'}", *RECORDED_WITH)
    build_index(cfg, progress=False)
    return cfg


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny local Qwen2 model and tokenizer (:mod:`support.tiny_qwen`), its tokenizer trained on the training examples."""
    from support.tiny_qwen import build_tiny_qwen

    texts = (DATA / "training" / "examples.jsonl").read_text().splitlines()
    return build_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen") / "model", texts)


@pytest.fixture(scope="session")
def prefect_server():
    """One Prefect test server for the session's flow tests; yields its API URL (tests that start worker
    processes export it, so that those report to the same server)."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # its heartbeat only adds log noise
    with prefect_test_harness(server_startup_timeout=60):
        yield PREFECT_API_URL.value()


@pytest.fixture(params=["openai/fake-model", VIA_LITELLM], ids=["direct", "litellm"])
def model(request, monkeypatch) -> str:
    """The model name for both ways to an OpenAI-compatible server: the direct HTTP client and litellm."""
    monkeypatch.setenv("LITELLM_PROXY_API_KEY", "no-key")  # litellm's proxy provider insists on a key
    return request.param
