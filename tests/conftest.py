"""Shared fixtures.

``small_index_cfg``: a real corpus index (real embeddings, real FAISS) over 300 documents of the
default corpus — the first 25 of each of its 12 topic labels, in file order — built once per session
in a temporary folder. The returned config points ``tools.index_dir`` at it, reads the corpus as JSONL
(with the ``topic`` label mapped to metadata), and keeps the LLM cache and the run directory in the
session's temporary folder. Derive per-test configs with :func:`derive`.

``tiny_model``: the tiny local Qwen2 model of the training tests, built once per session.
Helpers that are not fixtures live in ``tests/support/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llm_fakes import VIA_LITELLM
from rubricforge.config import Config, _set_dotted, parse_override

os.environ.setdefault("HF_HUB_OFFLINE", "1")
PER_TOPIC = 25
# the settings the replay recordings under tests/data/recordings were made with: the 0.5B embedded model, the
# paper's free-text extraction (Fig. 10), one-call merge (Fig. 11), the tree shape of the earlier defaults and
# torch embeddings (bf16 OpenVINO vectors may reorder near ties, so prompts would differ)
RECORDED_WITH = (*(f"llm.{role}.model=qwen2.5-coder-0.5b-instruct-q4" for role in ("generator", "verifier", "judge")),
                 "build.extract=free", "build.merge=single", "build.max_depth=3", "build.branching=[6,4,3]",
                 "build.max_nodes=10", "build.passages_per_node=2", "embedding.backend=torch")


def derive(cfg: Config, *overrides: str) -> Config:
    """A copy of ``cfg`` with ``key=value`` overrides, e.g. ``derive(cfg, "build.max_nodes=5")``."""
    data = cfg.model_dump(mode="json")
    for item in overrides:
        _set_dotted(data, *parse_override(item))
    return Config.model_validate(data)


def write_small_corpus(path: Path, per_topic: int = PER_TOPIC) -> Path:
    from rubricforge.corpora.default_corpus import summaries_path

    taken: dict[str, int] = {}
    with path.open("w", encoding="utf-8") as fh:
        for n, (key, art) in enumerate(json.loads(summaries_path().read_text(encoding="utf-8")).items(), 1):
            topic = art.get("topic") or ""
            if taken.get(topic, 0) >= per_topic:
                continue
            taken[topic] = taken.get(topic, 0) + 1
            fh.write(json.dumps({"id": f"wiki-{n:05d}", "title": art.get("title") or key, "text": art["extract"],
                                 "topic": topic}, ensure_ascii=False) + "\n")
    return path


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
    """A tiny local Qwen2 model and tokenizer (:mod:`tiny_qwen`), its tokenizer trained on the training examples."""
    from tiny_qwen import build_tiny_qwen

    texts = (Path(__file__).parent / "data" / "training" / "examples.jsonl").read_text().splitlines()
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
