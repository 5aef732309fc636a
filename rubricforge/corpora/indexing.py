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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from rubricforge.io.rejects import Rejects
from rubricforge.corpora.snapshot import SnapshotHasher
from rubricforge.errors import UserError
from rubricforge.io.files import atomic_write_json, read_json
from rubricforge.io.progress import StageBar

if TYPE_CHECKING:
    from rubricforge.corpora.index_store import CorpusIndex

INDEX_STATE_FILE = "index.json"
INDEX_FIX = "delete the index folder to build it again"


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


# ---------------------------------------------------------------- stages


def build_store(cfg: Config, out: Path, bar: StageBar | None = None) -> tuple[dict[str, Any], bool]:
    """The store stage alone: ``(state, reused)``; state has counts, snapshot hash and rejects."""
    bar = bar or StageBar(False)
    c = cfg.corpus
    source = open_source(c)  # a missing input fails here, before anything is written
    out.mkdir(parents=True, exist_ok=True)
    key = _key({"format": FORMAT_VERSION, "source": c.source, "path": c.path, "fields": c.fields, "split": c.split,
                "limit": c.limit, "chunk_words": c.chunk_words, "chunk_overlap": c.chunk_overlap,
                "files": source.fingerprint()})
    state = read_json(out / STORE_STATE_FILE, INDEX_FIX)
    if state and state.get("key") == key and (out / STORE_FILE).is_file():
        return state, True

    from rubricforge.corpora.store import StoreWriter

    (out / META_FILE).unlink(missing_ok=True)
    tmp = out / f".{STORE_FILE}.tmp"
    writer = StoreWriter(tmp)
    hasher = SnapshotHasher(c.chunk_words, c.chunk_overlap)
    advance = bar.task("load", total=c.limit)
    with Rejects(out / REJECTS_FILE) as rejects:
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
            raise
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


def index_ready(cfg: Config) -> bool:
    """Whether ``cfg.index_dir()`` holds a finished build (``meta.json`` is written last)."""
    return (cfg.index_dir() / META_FILE).is_file()


def open_index(cfg: Config, progress: bool = False) -> CorpusIndex:
    """The corpus index of ``cfg``, built first when missing."""
    from rubricforge.corpora.index_store import CorpusIndex

    if not index_ready(cfg):
        build_index(cfg, progress=progress)
    index = CorpusIndex.from_config(cfg)
    if len(index) == 0:
        raise UserError(f"the corpus index in {cfg.index_dir()} holds no passages",
                        "check corpus.source / corpus.path and run `rubricforge corpus build`")
    return index


def build_index(cfg: Config, progress: bool = True) -> IndexInfo:
    """Build (or finish, or reuse) the index of ``cfg.corpus`` in ``cfg.index_dir()``: the three stages
    below in turn (the ``index_corpus`` flow runs each as a task)."""
    t0 = time.perf_counter()
    with StageBar(progress) as bar:
        store = store_stage(cfg, bar)
        embedded = embed_stage(cfg, store, bar)
        indexed = index_stage(cfg, store, embedded, bar)
    return write_meta(cfg, store, embedded, indexed, time.perf_counter() - t0)


def store_stage(cfg: Config, bar: StageBar | None = None) -> dict[str, Any]:
    """Load and chunk into the passage store: ``{"state", "reused", "seconds"}``."""
    bar = bar or StageBar(False)
    t = time.perf_counter()
    check_params(cfg.corpus.chunk_words, cfg.corpus.chunk_overlap)
    state, reused = build_store(cfg, cfg.index_dir(), bar)
    bar.finish_open_tasks()
    rejected = state["rejects"]["total"]
    if rejected:
        bar.log(f"[yellow]{rejected} malformed records skipped[/yellow] "
                f"{state['rejects']['by_reason']} -> {state['rejects']['file']}")
    return {"state": state, "reused": reused, "seconds": time.perf_counter() - t}


def embed_stage(cfg: Config, store: dict[str, Any], bar: StageBar | None = None) -> dict[str, Any]:
    """Embed the store, resuming per shard: ``{"shards", "key", "embedded_now", "seconds"}``."""
    from rubricforge.corpora.embedding import Embedder, embed_store
    from rubricforge.corpora.store import PassageStore

    bar = bar or StageBar(False)
    t = time.perf_counter()
    out = cfg.index_dir()
    passages = PassageStore(out / STORE_FILE)
    try:
        shards, embedded_now = embed_store(passages, Embedder.from_config(cfg.embedding), out / EMBEDDINGS_DIR,
                                           shard_size=cfg.embedding.shard_size,
                                           corpus_hash=store["state"]["corpus_hash"],
                                           on_batch=bar.task("embed", total=len(passages)))
    finally:
        passages.close()
    return {"shards": shards, "key": _key(shards.identity), "embedded_now": embedded_now,
            "seconds": time.perf_counter() - t}


def index_stage(cfg: Config, store: dict[str, Any], embedded: dict[str, Any],
                bar: StageBar | None = None) -> dict[str, Any]:
    """Build the FAISS index unless one with the same key exists: ``{"params", "key", "reused", "seconds"}``."""
    from rubricforge.corpora import faiss_index

    bar = bar or StageBar(False)
    t = time.perf_counter()
    out, n, shards = cfg.index_dir(), store["state"]["n_passages"], embedded["shards"]
    params = faiss_index.build_params(cfg.index, n, shards.dim)
    index_key = _key({"embeddings": embedded["key"], "params": params})
    old = read_json(out / INDEX_STATE_FILE, INDEX_FIX)
    reused = bool(old and old.get("key") == index_key and (out / faiss_index.INDEX_FILE).is_file())
    if not reused:
        (out / META_FILE).unlink(missing_ok=True)
        (out / INDEX_STATE_FILE).unlink(missing_ok=True)
        if faiss_index.undertrained(params):
            bar.log(f"[yellow]IVF-PQ trained on {params['train_size']} vectors, fewer than FAISS recommends "
                    f"for 2^{params['pq_nbits']} PQ centroids: recall may suffer (exact or hnsw suit small "
                    "corpora)[/yellow]")
        index = faiss_index.build_faiss_index(params, shards, on_rows=bar.task(cfg.index.kind, total=n))
        faiss_index.save(index, out / faiss_index.INDEX_FILE)
        atomic_write_json(out / INDEX_STATE_FILE, {"key": index_key, "params": params})
        del index
    return {"params": params, "key": index_key, "reused": reused, "seconds": time.perf_counter() - t}


def write_meta(cfg: Config, store: dict[str, Any], embedded: dict[str, Any], indexed: dict[str, Any],
               seconds: float) -> IndexInfo:
    """Write ``meta.json`` (the index is now complete and consistent) and describe the build."""
    from rubricforge.corpora import faiss_index
    from rubricforge.corpora.embedding import resolve_model

    state, params, e = store["state"], indexed["params"], cfg.embedding
    reused = [name for name, was in (("store", store["reused"]), ("embeddings", not embedded["embedded_now"]),
                                     ("index", indexed["reused"])) if was]
    meta = {
        "format_version": FORMAT_VERSION,
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "corpus_hash": state["corpus_hash"],
        "n_passages": state["n_passages"],
        "n_documents": state["n_documents"],
        "corpus": {"source": cfg.corpus.source, "path": cfg.corpus.path, "fields": cfg.corpus.fields,
                   "split": cfg.corpus.split, "limit": cfg.corpus.limit, "chunk_words": cfg.corpus.chunk_words,
                   "chunk_overlap": cfg.corpus.chunk_overlap, "rejects": state["rejects"]},
        "embedding": {"model": e.model, "model_path": resolve_model(e.model), "dim": embedded["shards"].dim,
                      "query_prefix": e.query_prefix, "passage_prefix": e.passage_prefix,
                      "max_seq_length": e.max_seq_length, "batch_size": e.batch_size, "fp16": e.fp16,
                      "shard_size": e.shard_size, "backend": embedded["shards"].identity.get("backend", "torch")},
        "index": {**params, "ef_search": cfg.index.hnsw_ef_search, "nprobe": cfg.index.ivf_nprobe,
                  "gpu": cfg.index.gpu, "file": faiss_index.INDEX_FILE},
        "keys": {"store": state["key"], "embeddings": embedded["key"], "index": indexed["key"]},
        "last_build": {"seconds": round(seconds, 2), "reused": reused, "embedded_now": embedded["embedded_now"],
                       "stage_seconds": {k: round(v["seconds"], 2) for k, v in
                                         (("store", store), ("embed", embedded), ("index", indexed))}},
    }
    out = cfg.index_dir()
    atomic_write_json(out / META_FILE, meta)
    return IndexInfo(path=out, n_passages=state["n_passages"], kind=cfg.index.kind, corpus_hash=state["corpus_hash"],
                     n_documents=state["n_documents"], n_rejected=state["rejects"]["total"],
                     embedded_now=embedded["embedded_now"], reused=tuple(reused), seconds=seconds)
