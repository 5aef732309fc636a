"""Text helpers every layer shares: clipping, and the one sentence splitter (tree statements, KG evidence,
MaMs facts)."""

from __future__ import annotations

import re

ELLIPSIS = "…"


def clip(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= n else text[: n - 1].rstrip() + ELLIPSIS


def one_line(text: str, n: int) -> str:
    """``text`` on one line (whitespace runs become one space), clipped to ``n`` characters."""
    return clip(" ".join(text.split()), n)


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")
# a period after these ends an abbreviation, not a sentence: an initial (J. or U.S.) or a common short form
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:[A-Za-z]\.)+[A-Za-z]|\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|ca|c|No|Co|Inc"
                           r"|Ltd|Mt|Gen|Col|Lt|Rev|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec))\.$")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``: a break follows ``.``/``!``/``?`` (and closing quotes or
    brackets) before whitespace and a capital letter or digit, except after an initial or a common
    abbreviation (``J.``, ``U.S.``, ``Dr.``, ``Jan.``). Spans exclude surrounding whitespace."""
    spans, start = [], 0
    for m in _SENTENCE_BREAK.finditer(text):
        if _ABBREVIATION.search(text[max(0, m.start() - 12):m.start()]):
            continue
        spans.append((start, m.start() + len(m.group(1))))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        a += len(text[a:b]) - len(text[a:b].lstrip())
        b -= len(text[a:b]) - len(text[a:b].rstrip())
        if a < b:
            out.append((a, b))
    return out
