"""Claims of an answer (DeepRubric App. A.4.1): ``<cite id="a,b">span</cite>`` spans and uncited sentences.

Cite tags. ``<cite`` followed by attributes and ``>`` opens, ``</cite>`` closes; nothing else is a tag,
so a ``<`` inside a span ("p<0.05") is plain text and a span runs to the first ``</cite>``. The ``id``
value may be double-quoted, single-quoted or bare; it is split on commas, each id stripped, empty
pieces dropped, duplicates removed, order kept. Malformed markup is reported by :func:`cite_problems`:

* ``<cite>`` without an ``id`` attribute, or with no non-empty id: its span becomes an uncited claim;
* an empty piece in the id list (``id="a,,b"``);
* a ``<cite`` opened inside an open cite: its ids join the outer claim, which ends at the first ``</cite>``;
* an unclosed ``<cite``: the tag is dropped and the text after it is uncited;
* a stray ``</cite>``: dropped;
* a cite whose span is blank: kept as a cited claim with empty text (it can never be "meaningful").

Uncited text (between cites) is split by :func:`rubricforge.text.sentence_spans` (``markdown=True``: at line
breaks and CJK full stops too); pieces with no letter or digit (whitespace, Markdown markup such as ``##``,
``---``, ``|---|``) are skipped. Offsets are into the answer
text as given (tags included): a cited claim's ``start``/``end`` bracket the span between its tags, an
uncited claim's bracket the sentence without surrounding whitespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rubricforge.text import sentence_spans

_CITE_TAG = re.compile(r"<(/?)cite\b([^>]*)>", re.IGNORECASE)
_ID_ATTR = re.compile(r"""\bid\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
_WORDISH = re.compile(r"[^\W_]")
# Lexical units: CJK characters one by one, otherwise runs of letters/digits joined by an inner
# apostrophe, hyphen or decimal point ("don't", "state-of-the-art", "0.05" are one unit each).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_LEXICAL_UNIT = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+(?:['’.\-][^\W_{_CJK}]+)*")


@dataclass(frozen=True)
class Claim:
    """A claim of the answer; ``cited`` iff ``ids`` is non-empty."""

    text: str
    ids: tuple[str, ...]
    start: int
    end: int
    cited: bool


@dataclass(frozen=True)
class _Cite:
    ids: tuple[str, ...]
    start: int  # of the span (after the opening tag)
    end: int  # of the span (before the closing tag)
    outer_start: int  # of the opening tag
    outer_end: int  # after the closing tag
    has_id: bool


def lexical_units(text: str) -> list[str]:
    """Word tokens of ``text``: each CJK character, or a run of letters/digits (with inner ``'``, ``-``, ``.``)."""
    return _LEXICAL_UNIT.findall(text)


def strip_cite_tags(text: str) -> str:
    return _CITE_TAG.sub("", text)


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _parse_ids(attrs: str) -> tuple[tuple[str, ...], bool, bool]:
    """``(ids, has_id_attribute, had_empty_piece)`` of a cite tag's attribute text."""
    m = _ID_ATTR.search(attrs)
    if m is None:
        return (), False, False
    raw = next(g for g in m.groups() if g is not None)
    pieces = [p.strip() for p in raw.split(",")]
    return tuple(dict.fromkeys(p for p in pieces if p)), True, any(not p for p in pieces)


def _scan(answer: str) -> tuple[list[_Cite], list[str]]:
    """Well-formed cites in order, and the problems found (see the module docstring)."""
    cites: list[_Cite] = []
    problems: list[str] = []
    open_tag: re.Match[str] | None = None
    open_ids: list[str] = []
    has_id = False
    for m in _CITE_TAG.finditer(answer):
        closing, attrs = m.group(1), m.group(2)
        if not closing:
            ids, tag_has_id, empty_piece = _parse_ids(attrs)
            if not tag_has_id:
                problems.append(f"<cite> without an id attribute at {m.start()}")
            elif not ids:
                problems.append(f"<cite> with no id at {m.start()}")
            if empty_piece and ids:
                problems.append(f"empty id in <cite> at {m.start()}")
            if open_tag is not None:
                problems.append(f"nested <cite> at {m.start()}")
            else:
                open_tag, open_ids, has_id = m, [], False
            open_ids.extend(ids)
            has_id = has_id or tag_has_id
        elif open_tag is None:
            problems.append(f"stray </cite> at {m.start()}")
        else:
            if not answer[open_tag.end():m.start()].strip():
                problems.append(f"empty <cite> span at {open_tag.start()}")
            cites.append(_Cite(tuple(dict.fromkeys(open_ids)), open_tag.end(), m.start(),
                               open_tag.start(), m.end(), has_id))
            open_tag = None
    if open_tag is not None:
        problems.append(f"unclosed <cite> at {open_tag.start()}")
    return cites, problems


def cite_problems(answer: str) -> list[str]:
    """Malformed cite markup in ``answer`` (empty when every cite is well formed)."""
    return _scan(answer)[1]


def extract_claims(answer: str) -> list[Claim]:
    """Cited spans and uncited sentences of ``answer``, in order of position."""
    cites, _ = _scan(answer)
    claims: list[Claim] = []
    prev = 0
    for cite in cites:
        claims.extend(_uncited(answer, prev, cite.outer_start))
        text = strip_cite_tags(answer[cite.start:cite.end]).strip()
        if cite.ids:
            claims.append(Claim(text, cite.ids, cite.start, cite.end, True))
        elif _WORDISH.search(text):
            claims.append(Claim(text, (), *_trim(answer, cite.start, cite.end), False))
        prev = cite.outer_end
    claims.extend(_uncited(answer, prev, len(answer)))
    return claims


def _uncited(answer: str, start: int, end: int) -> list[Claim]:
    region = answer[start:end]
    out = []
    for s, e in sentence_spans(region, markdown=True):
        text = strip_cite_tags(region[s:e]).strip()
        if _WORDISH.search(text):
            out.append(Claim(text, (), start + s, start + e, False))
    return out


def cited_ids(answer: str) -> list[str]:
    """Every id cited by a well-formed cite of ``answer``, distinct, in order of first appearance."""
    return list(dict.fromkeys(i for c in _scan(answer)[0] for i in c.ids))
