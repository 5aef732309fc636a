"""``build_index``: load -> chunk -> store -> embed -> index, resumable, into ``cfg.index_dir()``.

The index folder::

    meta.json          written last: its presence means a finished, consistent build
    store.json         the store stage: input fingerprint, counts, snapshot hash, rejects
    passages.sqlite    the passage store (pos = row in the index)
    rejects.jsonl      malformed input records (only when there are any)
    embeddings/        state.json + shard-00000.npy ... (see embedding.embed_store)
    index.faiss        the FAISS index
    index.json         the index stage: its key and parameters

Each stage has a key (a hash of what shapes its output). A re-run with the same config and input
reuses every stage whose key matches: the store when the input files (path, size, mtime) and the
corpus / chunking settings are unchanged, the embedding shards that are already on disk when the
snapshot hash and the model are unchanged, the index when its parameters are unchanged too
(search-time knobs are only rewritten in ``meta.json``). Anything else is rebuilt. ``meta.json`` is
removed before a stage it describes is replaced, so an interrupted rebuild never leaves a folder
that opens as a stale index. An interrupted store stage starts over; embedding resumes per shard.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.corpora.chunking import check_params, chunk_document
from rubricforge.corpora.index_store import (
    EMBEDDINGS_DIR,
    FORMAT_VERSION,
    META_FILE,
    REJECTS_FILE,
    STORE_FILE,
    STORE_STATE_FILE,
)
from rubricforge.corpora.loaders import open_source
from rubricforge.corpora.rejects import Rejects
from rubricforge.corpora.snapshot import SnapshotHasher
from rubricforge.errors import UserError
from rubricforge.rundir import atomic_write_json

INDEX_STATE_FILE = "index.json"


@dataclass(frozen=True)
class IndexInfo:
    path: Path
    n_passages: int
    kind: str
    corpus_hash: str
    n_documents: int = 0
    n_rejected: int = 0
    embedded_now: int = 0  # passages embedded by this call (0 when everything was reused)
    reused: tuple[str, ...] = field(default_factory=tuple)  # stages taken from a previous build
    seconds: float = 0.0


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class _Progress:
    """A rich progress bar on stderr, or nothing."""

    def __init__(self, enabled: bool):
        self._p = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._p = Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                               TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                               console=Console(stderr=True))

    def __enter__(self) -> _Progress:
        if self._p is not None:
            self._p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.stop()

    def task(self, description: str, total: int | None = None) -> Callable[[int], None]:
        if self._p is None:
            return lambda n: None
        task_id = self._p.add_task(description, total=total)
        return lambda n: self._p.advance(task_id, n)

    def finish_open_tasks(self) -> None:
        """Mark tasks of unknown size as complete (e.g. loading, whose record count was unknown)."""
        if self._p is not None:
            for task in self._p.tasks:
                if task.total is None:
                    self._p.update(task.id, total=task.completed)
                    self._p.stop_task(task.id)

    def log(self, message: str) -> None:
        if self._p is not None:
            self._p.console.log(message)


# ---------------------------------------------------------------- stages


def build_store(cfg: Config, out: Path, bar: _Progress | None = None) -> tuple[dict[str, Any], bool]:
    """The store stage alone: ``(state, reused)``; state has counts, snapshot hash and rejects."""
    bar = bar or _Progress(False)
    c = cfg.corpus
    source = open_source(c)  # a missing input fails here, before anything is written
    out.mkdir(parents=True, exist_ok=True)
    key = _key({"format": FORMAT_VERSION, "source": c.source, "path": c.path, "fields": c.fields, "split": c.split,
                "limit": c.limit, "chunk_words": c.chunk_words, "chunk_overlap": c.chunk_overlap,
                "files": source.fingerprint()})
    state = _read_json(out / STORE_STATE_FILE)
    if state and state.get("key") == key and (out / STORE_FILE).is_file():
        return state, True

    from rubricforge.corpora.store import StoreWriter

    (out / META_FILE).unlink(missing_ok=True)
    tmp = out / f".{STORE_FILE}.tmp"
    writer = StoreWriter(tmp)
    rejects = Rejects(out / REJECTS_FILE)
    hasher = SnapshotHasher(c.chunk_words, c.chunk_overlap)
    advance = bar.task("load", total=c.limit)
    try:
        for doc in source.documents(rejects):
            chunks = chunk_document(doc, c.chunk_words, c.chunk_overlap)
            if not writer.add_document(chunks):
                rejects.add(c.path or source.name, None, "duplicate id", doc.id)
            else:
                for chunk in chunks:
                    hasher.update(chunk)
            advance(1)
        writer.close()
    except BaseException:
        writer.abort()
        rejects.discard()
        raise
    rejects.commit()
    if writer.n_passages == 0:
        tmp.unlink(missing_ok=True)
        where = c.path or source.files[0]
        raise UserError(f"the corpus {where} has no usable records ({rejects.total} rejected"
                        + (f", see {rejects.path}" if rejects.total else "") + ")",
                        "check corpus.path, corpus.source and corpus.fields")
    os.replace(tmp, out / STORE_FILE)
    state = {"key": key, "n_documents": writer.n_documents, "n_passages": writer.n_passages,
             "corpus_hash": hasher.hexdigest(), "rejects": rejects.summary(), "files": len(source.files)}
    atomic_write_json(out / STORE_STATE_FILE, state)
    return state, False


def build_index(cfg: Config, progress: bool = True) -> IndexInfo:
    """Build (or finish, or reuse) the index of ``cfg.corpus`` in ``cfg.index_dir()``."""
    from rubricforge.corpora import faiss_index
    from rubricforge.corpora.embedding import Embedder, embed_store, resolve_model
    from rubricforge.corpora.store import PassageStore

    t0 = time.perf_counter()
    check_params(cfg.corpus.chunk_words, cfg.corpus.chunk_overlap)
    out = cfg.index_dir()
    reused: list[str] = []
    timings: dict[str, float] = {}
    with _Progress(progress) as bar:
        state, store_reused = build_store(cfg, out, bar)
        bar.finish_open_tasks()
        timings["store"] = time.perf_counter() - t0
        if store_reused:
            reused.append("store")
        rejected = state["rejects"]["total"]
        if rejected:
            bar.log(f"[yellow]{rejected} malformed records skipped[/yellow] "
                    f"{state['rejects']['by_reason']} -> {state['rejects']['file']}")

        store = PassageStore(out / STORE_FILE)
        try:
            t = time.perf_counter()
            embedder = Embedder.from_config(cfg.embedding)
            shards, embedded_now = embed_store(store, embedder, out / EMBEDDINGS_DIR,
                                               shard_size=cfg.embedding.shard_size, corpus_hash=state["corpus_hash"],
                                               on_batch=bar.task("embed", total=len(store)))
            timings["embed"] = time.perf_counter() - t
            if not embedded_now:
                reused.append("embeddings")
            embeddings_key = _key(shards.identity)
        finally:
            store.close()

        t = time.perf_counter()
        params = faiss_index.build_params(cfg.index, state["n_passages"], shards.dim)
        index_key = _key({"embeddings": embeddings_key, "params": params})
        old = _read_json(out / INDEX_STATE_FILE)
        if old and old.get("key") == index_key and (out / faiss_index.INDEX_FILE).is_file():
            reused.append("index")
        else:
            (out / META_FILE).unlink(missing_ok=True)
            (out / INDEX_STATE_FILE).unlink(missing_ok=True)
            if faiss_index.undertrained(params):
                bar.log(f"[yellow]IVF-PQ trained on {params['train_size']} vectors, fewer than FAISS recommends "
                        f"for 2^{params['pq_nbits']} PQ centroids: recall may suffer (exact or hnsw suit small "
                        "corpora)[/yellow]")
            index = faiss_index.build(params, shards, on_rows=bar.task(cfg.index.kind, total=state["n_passages"]))
            faiss_index.save(index, out / faiss_index.INDEX_FILE)
            atomic_write_json(out / INDEX_STATE_FILE, {"key": index_key, "params": params})
            del index
        timings["index"] = time.perf_counter() - t

    e = cfg.embedding
    seconds = time.perf_counter() - t0
    meta = {
        "format_version": FORMAT_VERSION,
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "corpus_hash": state["corpus_hash"],
        "n_passages": state["n_passages"],
        "n_documents": state["n_documents"],
        "corpus": {"source": cfg.corpus.source, "path": cfg.corpus.path, "fields": cfg.corpus.fields,
                   "split": cfg.corpus.split, "limit": cfg.corpus.limit, "chunk_words": cfg.corpus.chunk_words,
                   "chunk_overlap": cfg.corpus.chunk_overlap, "rejects": state["rejects"]},
        "embedding": {"model": e.model, "model_path": resolve_model(e.model), "dim": shards.dim,
                      "query_prefix": e.query_prefix, "passage_prefix": e.passage_prefix,
                      "max_seq_length": e.max_seq_length, "batch_size": e.batch_size, "fp16": e.fp16,
                      "shard_size": e.shard_size},
        "index": {**params, "ef_search": cfg.index.hnsw_ef_search, "nprobe": cfg.index.ivf_nprobe,
                  "gpu": cfg.index.gpu, "file": faiss_index.INDEX_FILE},
        "keys": {"store": state["key"], "embeddings": embeddings_key, "index": index_key},
        "last_build": {"seconds": round(seconds, 2), "reused": reused, "embedded_now": embedded_now,
                       "stage_seconds": {k: round(v, 2) for k, v in timings.items()}},
    }
    atomic_write_json(out / META_FILE, meta)
    return IndexInfo(path=out, n_passages=state["n_passages"], kind=cfg.index.kind, corpus_hash=state["corpus_hash"],
                     n_documents=state["n_documents"], n_rejected=rejected, embedded_now=embedded_now,
                     reused=tuple(reused), seconds=seconds)
