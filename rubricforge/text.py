"""Text helpers every layer shares: clipping, lone surrogates made U+FFFD, and the one sentence splitter (tree statements, KG evidence,
MaMs facts, and answers' claims and tense check with ``markdown=True``)."""

from __future__ import annotations

import re

ELLIPSIS = "…"


def clip(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= n else text[: n - 1].rstrip() + ELLIPSIS


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (valid surrogate pairs become their character)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def uncut(text: str, bound: int) -> str:
    """``text`` that a length bound of ``bound`` characters (a grammar's ``maxLength``) may have stopped mid-word, as
    a reader should see it: shorter texts as they are; one at the bound ends at its last sentence end, else its last
    whole word, with an ellipsis ("... well-arr" becomes "... evidence-based, …")."""
    if len(text) < bound:
        return text
    ends = [m.end() for m in re.finditer(r"[.!?][\"')\]]*(?=\s)", text)]
    if ends and ends[-1] >= bound // 2:
        return text[:ends[-1]]
    head = text[: text.rfind(" ")] if " " in text else text
    return head.rstrip() + " " + ELLIPSIS


def one_line(text: str, n: int) -> str:
    """``text`` on one line (whitespace runs become one space), clipped to ``n`` characters."""
    return clip(" ".join(text.split()), n)


# a break: [.!?] (then closing quotes or brackets) and whitespace; in prose before a capital letter or a digit
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])([\"'”’)\]]*)\s+(?=[\"'“‘(\[]?[A-Z0-9])")
# in Markdown: before anything, and also after CJK full stops and at every line break
_MARKDOWN_BREAK = re.compile(r"(?<=[.!?])([\"'”’)\]]*)\s+|[。！？]+\s*|\s*\n\s*")
# a period after these ends an abbreviation, not a sentence: an initial (J. or U.S. or e.g.) or a short form
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:[A-Za-z]\.)+[A-Za-z]|\b(?:No|Co|Mt|Gen|Col|Lt|Rev|Jan|Feb|Mar|Apr|Jun|Jul"
                           r"|Aug|Sep|Sept|Oct|Nov|Dec|ca|c)|\b(?i:mr|mrs|ms|dr|prof|st|jr|sr|vs|etc|inc|ltd|cf|fig|figs"
                           r"|eq|eqs|et|al|approx|vol|pp))\.$")


def fmt(x: float | None) -> str:
    """A metric with three decimals; ``-`` when there is none."""
    return "-" if x is None else f"{x:.3f}"


def sentence_spans(text: str, *, markdown: bool = False) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``, surrounding whitespace excluded, blank ones skipped.

    A sentence ends after ``.``/``!``/``?`` (and closing quotes or brackets) and whitespace, except after an
    initial or a common abbreviation (``J.``, ``U.S.``, ``e.g.``, ``Dr.``, ``Jan.``, ``Fig.``, ``et al.``);
    decimals ("3.5") never split. Prose (tree statements, KG evidence, MaMs facts) breaks only before a capital
    letter or a digit. ``markdown=True`` reads an agent's answer (claims, the tense check): a break needs no
    capital after it, and CJK full stops and every line break end a piece too (headings, list items and table
    rows are pieces of their own)."""
    spans, start = [], 0
    for m in (_MARKDOWN_BREAK if markdown else _SENTENCE_BREAK).finditer(text):
        if m.group(1) is not None and _ABBREVIATION.search(text[max(0, m.start() - 12):m.start()]):
            continue
        spans.append((start, m.start() + len(m.group().rstrip())))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        a += len(text[a:b]) - len(text[a:b].lstrip())
        b -= len(text[a:b]) - len(text[a:b].rstrip())
        if a < b:
            out.append((a, b))
    return out
