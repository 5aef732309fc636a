"""Snippet ids and the snippet store.

Ids are stable: :func:`stable_id` hashes ``(kind, key)`` with BLAKE2b (same value in every process,
in-process or through the HTTP server), so the same passage gets the same id in every call. An id is
one letter for the kind — ``s`` a search result, ``p`` a scholar (paper) result, ``w`` a browsed
webpage — followed by 10 base32 characters (50 bits), e.g. ``s3kf9a2m1qz``: only lowercase letters
and digits, so it survives ``<cite id="a,b">`` and any tokenizer.

:class:`SnippetStore` keeps every snippet a tool returned (id -> :class:`Snippet`; the first one
stored under an id wins), so citations in a report can be resolved later. It is thread-safe and
round-trips through JSON (``to_json``/``from_json``, ``save``/``load``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from rubricforge.errors import UserError
from rubricforge.io.files import atomic_write_text
from rubricforge.schema import Snippet

ID_PREFIX = {"search": "s", "scholar": "p", "browse": "w"}


def stable_id(kind: str, key: str) -> str:
    """``kind`` is ``search``, ``scholar`` or ``browse``; ``key`` a passage id (or a document id for browse)."""
    digest = hashlib.blake2b(f"{kind}\x00{key}".encode(), digest_size=8).digest()
    return ID_PREFIX[kind] + base64.b32encode(digest).decode("ascii")[:10].lower()


class SnippetStore:
    def __init__(self, snippets: Iterable[Snippet] = ()):
        self._by_id: dict[str, Snippet] = {}
        self._lock = threading.Lock()
        self.add_many(snippets)

    def add(self, snippet: Snippet) -> Snippet:
        """Store ``snippet`` unless its id is already stored; returns the stored one."""
        with self._lock:
            return self._by_id.setdefault(snippet.id, snippet)

    def add_many(self, snippets: Iterable[Snippet]) -> None:
        with self._lock:
            for s in snippets:
                self._by_id.setdefault(s.id, s)

    def get(self, snippet_id: str) -> Snippet | None:
        with self._lock:
            return self._by_id.get(snippet_id)

    def get_many(self, snippet_ids: Iterable[str]) -> list[Snippet | None]:
        """The snippets in the order asked, None for an id never returned."""
        with self._lock:
            return [self._by_id.get(i) for i in snippet_ids]

    def __contains__(self, snippet_id: object) -> bool:
        with self._lock:
            return snippet_id in self._by_id

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)

    def __iter__(self) -> Iterator[Snippet]:
        with self._lock:
            return iter(list(self._by_id.values()))

    # ------------------------------------------------------------ JSON

    def to_json(self) -> str:
        return json.dumps([s.model_dump(mode="json") for s in self], ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> SnippetStore:
        return cls(Snippet.model_validate(item) for item in json.loads(text))

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> SnippetStore:
        path = Path(path)
        try:
            return cls.from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"snippet store {path} not found",
                            "pass the snippets file written by the rollout") from None
        except (ValueError, TypeError) as exc:  # JSON or validation errors
            raise UserError(f"snippet store {path} is not a list of snippets ({exc.__class__.__name__})",
                            "write it with SnippetStore.save") from None
