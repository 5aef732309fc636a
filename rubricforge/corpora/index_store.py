"""A built corpus index, opened for reading: search, lookup by id, whole documents.

``CorpusIndex.open(path)`` reads only ``meta.json``; the passage store, the FAISS index (memory-mapped)
and the query embedder load on first use, once, even under concurrent callers. The embedder runs under
the index's lock (its tokenizer is not thread-safe). Async callers ``await index.asearch(...)`` /
``aembed_queries(...)``: the work runs on the index's own worker thread, never on the event loop. The query
embeddings that one loop's coroutines ask for while an embedding runs are embedded together next, in one
call of the model: many trees in flight each ask for a query or two at a time, and a batch costs the model
about half the CPU per query of single ones (``benchmarks/synthesis.py``). A vector may differ from the one
embedded alone in the last bits of float32 (padding). Search-time knobs
(``ef_search``, ``nprobe``, ``gpu``, the embedding device) default to what the build recorded and
can be overridden per open; :meth:`CorpusIndex.from_config` takes them from a config.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rubricforge.corpora.chunking import join_chunks
from rubricforge.corpora.worker import Worker
from rubricforge.errors import UserError
from rubricforge.schema import Passage

if TYPE_CHECKING:
    from rubricforge.config import Config
    from rubricforge.corpora.embedding import Embedder
    from rubricforge.corpora.store import PassageStore

FORMAT_VERSION = 1
META_FILE = "meta.json"
STORE_FILE = "passages.sqlite"
STORE_STATE_FILE = "store.json"
REJECTS_FILE = "rejects.jsonl"
EMBEDDINGS_DIR = "embeddings"
QUERY_CACHE = 4096  # recent query embeddings kept in memory
QUERY_BATCH = 16  # aembed_queries: queries per model call; 16 cost about as much per query as 64, and wait less


@dataclass(frozen=True)
class Hit:
    passage: Passage
    score: float


class CorpusIndex:
    def __init__(self, path: Path, meta: dict[str, Any], *, gpu: str | None = None, ef_search: int | None = None,
                 nprobe: int | None = None, device: str | None = None):
        self.path = path
        self.meta = meta
        self.gpu_mode = gpu or meta["index"].get("gpu", "auto")
        self.ef_search = ef_search or meta["index"].get("ef_search")
        self.nprobe = nprobe or meta["index"].get("nprobe")
        self.device = device or "auto"
        self._lock = threading.RLock()
        self._worker = Worker("rubricforge-index")
        self._store: PassageStore | None = None
        self._searcher: Any = None  # a faiss.Index or a TorchExactSearch
        self._embedder: Embedder | None = None
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # LRU of recent query embeddings
        # per event loop: the aembed_queries calls waiting for the next batch, and the task that embeds them
        self._waiting: dict[asyncio.AbstractEventLoop, list[tuple[list[str], asyncio.Future[np.ndarray]]]] = {}
        self._batching: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    @classmethod
    def open(cls, path: str | Path, **search_options: Any) -> CorpusIndex:
        path = Path(path).expanduser()
        meta_path = path / META_FILE
        if not meta_path.is_file():
            raise UserError(f"no corpus index in {path}", "run `rubricforge corpus build` (with the same config) first")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format_version") != FORMAT_VERSION:
            raise UserError(f"the corpus index in {path} has format {meta.get('format_version')}, "
                            f"this rubricforge reads {FORMAT_VERSION}", "run `rubricforge corpus build` again")
        return cls(path, meta, **search_options)

    @classmethod
    def from_config(cls, cfg: Config) -> CorpusIndex:
        """Open ``cfg.index_dir()`` with the config's search-time settings."""
        return cls.open(cfg.index_dir(), gpu=cfg.index.gpu, ef_search=cfg.index.hnsw_ef_search,
                        nprobe=cfg.index.ivf_nprobe, device=cfg.embedding.device)

    # ------------------------------------------------------------ description

    @property
    def corpus_hash(self) -> str:
        return self.meta["corpus_hash"]

    @property
    def kind(self) -> str:
        return self.meta["index"]["kind"]

    def __len__(self) -> int:
        return int(self.meta["n_passages"])

    def info(self) -> dict[str, Any]:
        return {"path": str(self.path), **self.meta,
                "search": {"gpu": self.gpu_mode, "ef_search": self.ef_search, "nprobe": self.nprobe}}

    # ------------------------------------------------------------ lazy parts

    @property
    def store(self) -> PassageStore:
        if self._store is None:
            with self._lock:
                if self._store is None:
                    from rubricforge.corpora.store import PassageStore

                    self._store = PassageStore(self.path / STORE_FILE)
        return self._store

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    from rubricforge.corpora.embedding import Embedder

                    e = self.meta["embedding"]
                    self._embedder = Embedder(e["model"], device=self.device, batch_size=e.get("batch_size", 64),
                                              fp16=e.get("fp16", True), max_seq_length=e.get("max_seq_length"),
                                              query_prefix=e.get("query_prefix", ""),
                                              passage_prefix=e.get("passage_prefix", ""),
                                              backend=e.get("backend", "torch"))
        return self._embedder

    def _search_backend(self) -> Any:
        if self._searcher is None:
            with self._lock:
                if self._searcher is None:
                    self._searcher = self._load_searcher()
        return self._searcher

    def _load_searcher(self) -> Any:
        from rubricforge.corpora import faiss_index
        from rubricforge.corpora.gpu_search import TorchExactSearch, use_gpu

        index = faiss_index.load(self.path / faiss_index.INDEX_FILE)
        if index.ntotal != len(self):
            raise UserError(f"the corpus index in {self.path} holds {index.ntotal} vectors for {len(self)} passages",
                            "run `rubricforge corpus build` again")
        if use_gpu(self.gpu_mode, self.kind):
            return TorchExactSearch(faiss_index.flat_vectors(index), device="cuda")
        faiss_index.set_search_params(index, ef_search=self.ef_search, nprobe=self.nprobe)
        return index

    @property
    def on_gpu(self) -> bool:
        from rubricforge.corpora.gpu_search import TorchExactSearch

        return isinstance(self._search_backend(), TorchExactSearch)

    # ------------------------------------------------------------ search and lookup

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query embeddings; recent queries are answered from an LRU of ``QUERY_CACHE`` vectors (a
        pipeline embeds a query for its redundancy check, then searches with it)."""
        with self._lock:
            if not texts:
                return self.embedder.embed_queries([])
            cache = self._query_vectors
            known = {t: cache[t] for t in texts if t in cache}
            missing = [t for t in dict.fromkeys(texts) if t not in known]
            if missing:
                known.update(zip(missing, self.embedder.embed_queries(missing), strict=True))
            for t in dict.fromkeys(texts):
                cache[t] = known[t]
                cache.move_to_end(t)
            while len(cache) > QUERY_CACHE:
                cache.popitem(last=False)
        return np.stack([known[t] for t in texts])

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_queries` on the index's worker thread, batched with the calls of the same loop that
        come while an embedding runs."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[np.ndarray] = loop.create_future()
        self._waiting.setdefault(loop, []).append((list(texts), answer))
        if loop not in self._batching:
            self._batching[loop] = loop.create_task(self._embed_waiting(loop))
        return await answer

    async def _embed_waiting(self, loop: asyncio.AbstractEventLoop) -> None:
        """Embeds the waiting calls, first come first served, in batches of about ``QUERY_BATCH`` queries (a
        call is never split) until none is left; a failure fails the calls of its batch."""
        batch: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
        try:
            while waiting := self._waiting.get(loop):
                n = size = 0
                while n < len(waiting) and (n == 0 or size + len(waiting[n][0]) <= QUERY_BATCH):
                    size, n = size + len(waiting[n][0]), n + 1
                batch, waiting[:n] = waiting[:n], []
                try:
                    vectors = await self._worker.run(self.embed_queries, [t for texts, _ in batch for t in texts])
                except Exception as e:
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(e)
                    continue
                start = 0
                for texts, answer in batch:
                    if not answer.done():  # not cancelled meanwhile
                        answer.set_result(vectors[start:start + len(texts)])
                    start += len(texts)
        finally:  # cancelled (the loop is closing): so are the calls still waiting
            del self._batching[loop]
            for _, answer in batch + self._waiting.pop(loop, []):
                answer.cancel()  # no-op on an answered call

    async def aembed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Passage embeddings (as the index embedded its passages: ``passage_input``), on the index's worker
        thread; not cached (the evidence tree's passage gate keeps its own)."""
        return await self._worker.run(self.embedder.embed_passages, list(texts))

    def search_vectors(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Raw ``(scores, positions)``, each ``(len(vectors), k)``; a position of -1 means no result."""
        k = max(1, min(k, len(self)))
        return self._search_backend().search(np.ascontiguousarray(vectors, dtype=np.float32), k)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` passages per query, best first."""
        if not queries:
            return []
        scores, positions = self.search_vectors(self.embed_queries(queries), k)
        found = sorted({int(p) for p in positions.ravel() if p >= 0})
        by_pos = dict(zip(found, self.store.at(found), strict=True))
        return [[Hit(by_pos[int(p)], float(s)) for s, p in zip(row_s, row_p, strict=True) if p >= 0]
                for row_s, row_p in zip(scores, positions, strict=True)]

    async def asearch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """:meth:`search` on the index's worker thread."""
        return await self._worker.run(self.search, list(queries), k)

    def get(self, passage_id: str) -> Passage | None:
        return self.store.get(passage_id)

    def document(self, doc_id: str) -> list[Passage]:
        """All passages of a document, in order (empty if there is no such document)."""
        return self.store.document(doc_id)

    def doc_id_for_url(self, url: str) -> str | None:
        """The id of the document whose ``metadata.url`` is ``url`` (e.g. a Wikipedia link), if any."""
        return self.store.doc_id_for_url(url)

    def document_text(self, doc_id: str) -> str | None:
        """The document's full text, its chunks joined without the overlaps."""
        chunks = self.document(doc_id)
        return join_chunks(chunks) if chunks else None

    def iter_passages(self) -> Iterator[Passage]:
        return iter(self.store)

    def close(self) -> None:
        self._worker.close()
        if self._store is not None:
            self._store.close()
            self._store = None
        self._searcher = None

    def __enter__(self) -> CorpusIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
