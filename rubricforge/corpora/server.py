"""HTTP retrieval server (FastAPI), compatible with ASearcher's local retrieval server.

Started by ``rubricforge corpus serve``; the indexes are opened when the app is created and loaded
(passage store, FAISS index, embedding model) once at startup, before the first request.

Endpoints (field names as in ASearcher's ``tools/local_retrieval_server.py`` and its client):

* ``POST /retrieve`` ``{"queries": [str, ...], "topk": int | null, "return_scores": bool}`` ->
  ``{"result": [[document, ...], ...]}``, one list per query, best first; with
  ``return_scores: true`` each item is ``{"document": document, "score": float}``. ``topk`` null or
  0 means ``tools.top_k``. A document carries ``contents`` (``"<title>\\n<text>"``) and ``url`` as
  ASearcher's client expects, plus ``id``, ``doc_id``, ``title``, ``text``, ``metadata`` (see
  :mod:`rubricforge.corpora.remote`).
* ``POST /access`` ``{"urls": [str, ...]}`` -> ``{"result": [page | null, ...]}``: each entry may be
  a url, a document id or a passage id; a page is the whole document (``url``, ``contents``, ``id``,
  ``doc_id``, ``title``, ``text``, ``passage_ids``). Unknown -> null. An optional ``"index":
  "search" | "scholar"`` restricts the lookup to one index (default: search, then scholar).
* ``POST /scholar``: as ``/retrieve``, over the scholar index (``tools.scholar_index_dir``); 404
  when the server has none.
* ``POST /search``: OpenScholar's API (:mod:`rubricforge.corpora.openscholar`), ``{"query": str | [str],
  "n_docs": int, "domains": str}`` -> ``{"message", "query", "n_docs", "results": {"IDs", "passages",
  "scores"}}``, over the scholar index when the server has one, else the search index (``domains`` is echoed).
* ``GET /health`` -> ``{"status": "ok", "indexes": {"search": {...}, "scholar": {...}}}`` with each
  index's path, passages, kind and corpus hash.

The server does no leakage filtering and keeps no snippet store: those belong to each client's
ToolBox (``tools.server_url``), so one server can serve many rollouts with different questions.

Defences: a request body above ``tools.server_max_body_bytes`` gets 413 before it is read whole; a lone
surrogate in a query or url (not valid Unicode text) becomes U+FFFD and the rest is searched (200: ASearcher's
client retries any status but 200 10 times 10 s apart, so a 422 would stall it 100 s); at most ``MAX_QUERIES``
queries or urls per request. An empty or blank query gets an empty result list on ``/retrieve`` (200), as from
ASearcher's own server (a policy that writes ``<search></search>`` would otherwise lose those 100 s per call),
and on OpenScholar's ``/search``; ``/scholar``, which only rubricforge's own client calls, answers it with 422.
``benchmarks/server_burst.py`` measures a burst of concurrent requests.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from collections.abc import AsyncIterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from rubricforge.config import Config
from rubricforge.corpora.openscholar import search_answer
from rubricforge.corpora.remote import page_record, passage_record
from rubricforge.corpora.tools import MAX_FETCH, local_retrievers
from rubricforge.errors import UserError
from rubricforge.extras import needs
from rubricforge.io.files import atomic_write_text
from rubricforge.text import clean_text

with needs("server"):
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

MAX_TOPK = MAX_FETCH
MAX_QUERIES = 512


def _text(values: list[str], what: str, empty_ok: bool = False) -> list[str]:
    """``values`` with lone surrogates made U+FFFD; a blank one is a ValueError unless ``empty_ok``."""
    if not empty_ok and any(not value.strip() for value in values):
        raise ValueError(f"every {what} must be non-empty")
    return [clean_text(value) for value in values]


class RetrieveRequest(BaseModel):
    """``/retrieve``: a blank query is allowed and finds nothing."""

    queries: list[str] = Field(max_length=MAX_QUERIES)
    topk: int | None = Field(None, ge=0, le=MAX_TOPK)
    return_scores: bool = False

    @field_validator("queries")
    @classmethod
    def _queries(cls, v: list[str]) -> list[str]:
        return _text(v, "query", empty_ok=True)


class ScholarRequest(RetrieveRequest):
    """``/scholar``: every query must be non-blank."""

    @field_validator("queries")
    @classmethod
    def _queries(cls, v: list[str]) -> list[str]:
        return _text(v, "query")


class OpenScholarRequest(BaseModel):
    query: str | list[str] = Field(max_length=MAX_QUERIES)
    n_docs: int = Field(1, ge=1, le=MAX_TOPK)
    domains: str = ""

    @field_validator("query")
    @classmethod
    def _query(cls, v: str | list[str]) -> str | list[str]:
        return clean_text(v) if isinstance(v, str) else _text(v, "query", empty_ok=True)


class AccessRequest(BaseModel):
    urls: list[str] = Field(max_length=MAX_QUERIES)
    index: Literal["search", "scholar"] | None = None

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        return _text(v, "url", empty_ok=True)  # an empty url finds nothing: null


class BodyLimit:
    """ASGI middleware: 413 for a request body above ``max_bytes``, by its Content-Length or, without one,
    counted as it streams in (the body is read here, at most ``max_bytes`` of it, and handed on whole)."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await self._too_large(send)
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                return await self._too_large(send)
            if not message.get("more_body"):
                break
        body, handed = b"".join(chunks), False

        async def replay():
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, send) -> None:
        body = f'{{"detail": "request body larger than {self.max_bytes} bytes (tools.server_max_body_bytes)"}}'
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body.encode()})


class _Batcher:
    """One search at a time per index (the embedder and FAISS are not shared across threads), and the
    requests that waited meanwhile go together: the thread that gets the index searches every pending
    request's queries in one call (one embedding batch) and hands each its rows. Under a burst this turns
    N searches into about N / (requests waiting) of them."""

    def __init__(self, retriever):
        self.retriever = retriever
        self._turn = threading.Lock()
        self._lock = threading.Lock()
        self._pending: list[tuple[list[str], int, Future]] = []

    def search(self, queries: list[str], k: int) -> list:
        mine: Future = Future()
        with self._lock:
            self._pending.append((queries, k, mine))
        with self._turn:
            if not mine.done():  # nobody served it while it waited: serve everything pending
                with self._lock:
                    batch, self._pending = self._pending, []
                try:
                    rows = self.retriever.search([q for qs, _, _ in batch for q in qs], max(k for _, k, _ in batch))
                except BaseException as exc:
                    for _, _, fut in batch:
                        fut.set_exception(exc)
                else:
                    at = 0
                    for qs, kk, fut in batch:
                        fut.set_result([row[:kk] for row in rows[at:at + len(qs)]])
                        at += len(qs)
        return mine.result()


def create_app(cfg: Config) -> FastAPI:
    """The app over ``cfg.index_dir()`` (and ``tools.scholar_index_dir``); UserError if one is missing."""
    retrievers = local_retrievers(cfg)
    indexes = {name: r.index for name, r in retrievers.items()}
    batchers = {name: _Batcher(r) for name, r in retrievers.items()}  # one search at a time per index

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for name in indexes:  # load store, FAISS index and embedder before serving
            batchers[name].search(["warm up"], 1)
        yield
        for retriever in retrievers.values():
            retriever.close()

    app = FastAPI(title="rubricforge retrieval server", lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=cfg.tools.server_max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """422 naming each bad field, without echoing the input (it may not even be encodable)."""
        return JSONResponse({"detail": [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))}
                                        for e in exc.errors()]}, status_code=422)

    def search(name: str, queries: list[str], k: int) -> list[list]:
        """Hits per query; a blank query finds nothing (it is not searched)."""
        asked = [q for q in queries if q.strip()]
        found = iter(batchers[name].search(asked, k) if asked else [])
        return [next(found) if q.strip() else [] for q in queries]

    def retrieve(name: str, request: RetrieveRequest) -> dict:
        if name not in retrievers:
            raise HTTPException(404, f"this server has no {name} index (start it with tools.scholar_index_dir set)")
        rows = search(name, request.queries, request.topk or cfg.tools.top_k)
        if request.return_scores:
            return {"result": [[{"document": passage_record(h.passage), "score": h.score} for h in row]
                               for row in rows]}
        return {"result": [[passage_record(h.passage) for h in row] for row in rows]}

    @app.post("/retrieve")
    def retrieve_endpoint(request: RetrieveRequest) -> dict:
        return retrieve("search", request)

    @app.post("/scholar")
    def scholar_endpoint(request: ScholarRequest) -> dict:
        return retrieve("scholar", request)

    @app.post("/search")
    def openscholar_endpoint(request: OpenScholarRequest) -> dict:
        name = "scholar" if "scholar" in retrievers else "search"
        queries = [request.query] if isinstance(request.query, str) else request.query
        rows = search(name, queries, request.n_docs)
        return search_answer(request.query, request.n_docs, request.domains, rows)

    @app.post("/access")
    def access_endpoint(request: AccessRequest) -> dict:
        if request.index is not None and request.index not in retrievers:
            raise HTTPException(404, f"this server has no {request.index} index")
        names: list[str] = [request.index] if request.index else list(retrievers)
        return {"result": [_access(url.strip(), names) for url in request.urls]}

    def _access(target: str, names: list[str]) -> dict | None:
        for name in names:
            page = retrievers[name].page(target) if target else None
            if page is not None:
                return page_record(page)
        return None

    @app.get("/health")
    def health_endpoint() -> dict:
        return {"status": "ok", "indexes": {name: {"path": str(index.path), "n_passages": len(index),
                                                   "kind": index.kind, "corpus_hash": index.corpus_hash}
                                            for name, index in indexes.items()}}

    return app


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise UserError(f"cannot listen on {host}:{port} ({exc.strerror})",
                            "pass another --port or --host") from None


def save_address(target: str | Path, host: str, port: int) -> Path:
    """Write ``ip:port`` where ASearcher / AReaL clients look for retrieval servers: into ``target`` when it
    names a ``.txt`` file, else into the folder ``target`` as ``Host<ip>_IP<port>.txt`` (ASearcher's layout).
    A wildcard host is written as this machine's address."""
    ip = host
    if host in ("0.0.0.0", "::", ""):
        try:
            ip = socket.gethostbyname(socket.gethostname())
        except OSError:
            ip = "127.0.0.1"
    target = Path(target)
    path = target if target.suffix == ".txt" else target / f"Host{ip}_IP{port}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, f"{ip}:{port}")
    return path


def serve(cfg: Config, host: str = "127.0.0.1", port: int = 8765, save_address_to: str | Path | None = None) -> None:
    """Run the server with uvicorn until interrupted; ``save_address_to``: see :func:`save_address`."""
    with needs("server"):
        import uvicorn

    app = create_app(cfg)
    _check_port(host, port)
    if save_address_to is not None:
        save_address(save_address_to, host, port)
    uvicorn.run(app, host=host, port=port, log_level="info")
