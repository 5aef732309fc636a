"""Leakage guard: withhold retrieved text that shares a normalised n-gram (13 words by default) with
forbidden texts, e.g. the question an agent is being trained on.

Normalisation: lowercase, apostrophes removed (``don't`` -> ``dont``), every other run of
punctuation, symbols or underscores becomes a space, then split on whitespace into word tokens.
The guard keeps one hash per n-gram of the forbidden texts in a set, so checking a passage costs
one hash and one set lookup per word. A forbidden text shorter than ``n`` words has no n-gram and
guards nothing (the usual 13-gram decontamination rule); :attr:`LeakageGuard.short_texts` counts them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

APOSTROPHES = re.compile(r"['\u2019\u02bc]")
NON_WORD = re.compile(r"[\W_]+")


def normalised_words(text: str) -> list[str]:
    return NON_WORD.sub(" ", APOSTROPHES.sub("", text.lower())).split()


def ngram_hashes(text: str, n: int) -> set[int]:
    words = normalised_words(text)
    return {hash(tuple(words[i:i + n])) for i in range(len(words) - n + 1)}


class LeakageGuard:
    """``leaks(text)`` is True when ``text`` shares an ``n``-gram with a forbidden text; thread-safe."""

    def __init__(self, forbidden_texts: Iterable[str] = (), n: int = 13):
        if n < 1:
            raise ValueError("the n-gram length must be >= 1")
        self.n = n
        self._hashes: set[int] = set()
        self.short_texts = 0
        self.dropped = 0  # results withheld so far (counted by :meth:`count_dropped`)
        self._lock = threading.Lock()
        self.add(forbidden_texts)

    def add(self, texts: Iterable[str]) -> None:
        for text in texts:
            hashes = ngram_hashes(text, self.n)
            with self._lock:
                self._hashes |= hashes
                self.short_texts += not hashes

    def __bool__(self) -> bool:
        return bool(self._hashes)

    def leaks(self, text: str) -> bool:
        if not self._hashes:
            return False
        words = normalised_words(text)
        n = self.n
        return any(hash(tuple(words[i:i + n])) in self._hashes for i in range(len(words) - n + 1))

    def count_dropped(self, number: int = 1) -> None:
        with self._lock:
            self.dropped += number
