"""The corpus snapshot hash: one sha256 over every passage's (id, title, text), in store order, and
the chunking parameters. Two builds of the same corpus with the same chunking agree; any change of
a passage, of their order or of the chunking changes it. Records carry it as provenance."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from rubricforge.schema import Passage

HASH_VERSION = 1


class SnapshotHasher:
    """Incremental: ``update`` each passage as it is stored, then ``hexdigest``."""

    def __init__(self, chunk_words: int, chunk_overlap: int):
        self._h = hashlib.sha256()
        header = {"version": HASH_VERSION, "chunk_words": chunk_words, "chunk_overlap": chunk_overlap}
        self._field(json.dumps(header, sort_keys=True))

    def _field(self, value: str) -> None:
        data = value.encode("utf-8")
        self._h.update(len(data).to_bytes(8, "little"))  # length-prefixed: no two field splits collide
        self._h.update(data)

    def update(self, passage: Passage) -> None:
        for value in (passage.id, passage.title, passage.text):
            self._field(value)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def corpus_hash(passages: Iterable[Passage], chunk_words: int, chunk_overlap: int) -> str:
    hasher = SnapshotHasher(chunk_words, chunk_overlap)
    for passage in passages:
        hasher.update(passage)
    return hasher.hexdigest()
