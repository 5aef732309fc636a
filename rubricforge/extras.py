"""Optional features and the pip extras that install them.

``pip install rubricforge`` alone scores responses (the rule rewards and an LLM judge over litellm) and
compiles nothing. Every heavier feature is an extra (``pyproject.toml``); each import of one of its
packages sits inside :func:`needs`, so a missing package ends with one line naming the extra (the CLI
exits 2 on it) instead of a traceback::

    with needs("index"):
        import faiss
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rubricforge.errors import UserError

EXTRAS = {  # extra -> the feature it installs
    "local": "the embedded local LLM (llama-cpp-python, compiled once, and the packaged GGUF model)",
    "index": "embedding and search (torch, sentence-transformers, FAISS, the packaged MiniLM and default corpus)",
    "data": "datasets and the knowledge graph (Hugging Face datasets, pyarrow, networkx)",
    "flows": "Prefect flows and Dask runners",
    "server": "the HTTP corpus server (FastAPI, uvicorn)",
    "train": "TRL training (trl, transformers, datasets, torch, scikit-learn)",
    "gguf": "the embedded GGUF model as a trainable transformers policy (gguf)",
    "audit": "judge audits (scipy, scikit-learn)",
    "openvino": "the OpenVINO embedding backend (openvino; onnx for the local export of the packaged model)",
    "ray": "Ray runners (prefect-ray, ray)",
}


def install_hint(extra: str) -> str:
    """The fix that installs ``extra``."""
    return f"install rubricforge[{extra}]: pip install 'rubricforge[{extra}]' ({EXTRAS[extra]})"


@contextmanager
def needs(extra: str) -> Iterator[None]:
    """Around the import of an optional package: a missing one becomes a :class:`UserError` naming the
    package and the extra that installs it."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    try:
        yield
    except ModuleNotFoundError as exc:
        package = (exc.name or "a package").split(".")[0]
        raise UserError(f"{package} is not installed", install_hint(extra)) from None
