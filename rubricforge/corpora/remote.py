"""The retrieval server's wire format and an httpx client for it.

A ``document`` (one passage) on the wire — ASearcher's client reads ``contents`` and ``url``::

    {"id": passage id, "doc_id": ..., "title": ..., "text": ..., "contents": "<title>\\n<text>",
     "url": metadata.url, or the document id when the corpus has no urls, "metadata": {...}}

A ``page`` (a whole document, from ``/access``) has ``url``, ``id`` (= ``doc_id``), ``doc_id``,
``title``, ``text``, ``contents`` and ``passage_ids``. :class:`RemoteRetriever` turns these back
into the same :class:`~rubricforge.schema.Passage` / :class:`~rubricforge.corpora.tools.Page`
objects an in-process index gives, so a ToolBox shows the same snippets either way.

Transport failures (after ``retries`` quick retries on connection errors and 5xx) raise
:class:`~rubricforge.corpora.tools.RetrievalError`, which the tools turn into a ``[tool error]`` line;
:func:`connect` raises a UserError when the server cannot be reached at all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from rubricforge.corpora.index_store import Hit
from rubricforge.corpora.tools import Page, RetrievalError
from rubricforge.errors import UserError
from rubricforge.schema import Passage

ENDPOINTS = {"search": "/retrieve", "scholar": "/scholar"}
SERVE_HINT = "start it with `rubricforge corpus serve` or fix tools.server_url"


def passage_record(p: Passage) -> dict[str, Any]:
    return {"id": p.id, "doc_id": p.doc_id, "title": p.title, "text": p.text, "contents": f"{p.title}\n{p.text}",
            "url": str(p.metadata.get("url") or p.doc_id or p.id), "metadata": p.metadata}


def record_passage(rec: dict[str, Any]) -> Passage:
    return Passage(id=rec["id"], doc_id=rec.get("doc_id", ""), title=rec.get("title", ""), text=rec["text"],
                   metadata=rec.get("metadata") or {})


def page_record(page: Page) -> dict[str, Any]:
    return {"url": page.url or page.doc_id, "id": page.doc_id, "doc_id": page.doc_id, "title": page.title,
            "text": page.text, "contents": f"{page.title}\n{page.text}", "passage_ids": list(page.passage_ids)}


def record_page(rec: dict[str, Any]) -> Page:
    url = rec.get("url") or ""
    return Page(doc_id=rec["doc_id"], title=rec.get("title", ""), text=rec["text"],
                url="" if url == rec["doc_id"] else url, passage_ids=tuple(rec.get("passage_ids") or ()))


class RemoteRetriever:
    """One index (``"search"`` or ``"scholar"``) of a running ``rubricforge corpus serve``."""

    def __init__(self, base_url: str, index: str = "search", *, timeout: float = 30.0, retries: int = 2,
                 client: httpx.Client | None = None):
        if index not in ENDPOINTS:
            raise ValueError(f"index must be one of {sorted(ENDPOINTS)}")
        self.base_url = base_url.rstrip("/")
        self.index = index
        self.retries = retries
        self._owns_client = client is None
        self.client = client if client is not None else httpx.Client(base_url=self.base_url, timeout=timeout)

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        attempt = 0
        while True:
            try:
                response = self.client.post(path, json=payload)
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise RetrievalError(f"cannot reach the retrieval server {self.base_url} "
                                         f"({exc.__class__.__name__})", SERVE_HINT) from None
            else:
                if response.status_code < 500 or attempt >= self.retries:
                    return self._json(response, path)
            time.sleep(0.2 * 2 ** attempt)
            attempt += 1

    def _json(self, response: httpx.Response, path: str) -> Any:
        if response.is_error:
            raise RetrievalError(f"the retrieval server {self.base_url} answered {path} with "
                                 f"HTTP {response.status_code}: {_detail(response)}")
        try:
            return response.json()
        except ValueError:
            raise RetrievalError(f"the retrieval server {self.base_url} sent invalid JSON for {path}") from None

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        body = self._post(ENDPOINTS[self.index], {"queries": list(queries), "topk": k, "return_scores": True})
        try:
            rows = [[Hit(record_passage(item["document"]), float(item["score"])) for item in row]
                    for row in body["result"]]
        except (KeyError, TypeError, ValueError):
            rows = None
        if rows is None or len(rows) != len(queries):
            raise RetrievalError(f"the retrieval server {self.base_url} sent an unexpected "
                                 f"{ENDPOINTS[self.index]} answer")
        return rows

    def page(self, target: str) -> Page | None:
        body = self._post("/access", {"urls": [target], "index": self.index})
        try:
            rec = body["result"][0]
            return None if rec is None else record_page(rec)
        except (KeyError, IndexError, TypeError, ValueError):
            raise RetrievalError(f"the retrieval server {self.base_url} sent an unexpected /access answer") from None

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", "")
    except (ValueError, AttributeError):
        detail = ""
    return str(detail or response.text)[:300]


def health(base_url: str, timeout: float = 30.0) -> dict[str, Any]:
    """The server's ``/health`` answer; UserError naming the url when it cannot be reached."""
    try:
        response = httpx.get(base_url.rstrip("/") + "/health", timeout=timeout)
        response.raise_for_status()
        body = response.json()
    except httpx.HTTPError as exc:
        raise UserError(f"cannot reach the retrieval server {base_url} ({exc.__class__.__name__})",
                        SERVE_HINT) from None
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("indexes"), dict):
        raise UserError(f"{base_url} does not answer /health like a rubricforge retrieval server", SERVE_HINT)
    return body


def connect(base_url: str, timeout: float = 30.0) -> dict[str, RemoteRetriever]:
    """A retriever for each index the server holds (``search``, and ``scholar`` when it has one)."""
    indexes = health(base_url, timeout)["indexes"]
    return {name: RemoteRetriever(base_url, name, timeout=timeout) for name in ENDPOINTS if name in indexes}
