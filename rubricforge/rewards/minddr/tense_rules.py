"""Temporal-tense check, stage 1 (MindDR App. 8.4): predictions about a time point already past.

:func:`find_tense_candidates` flags a sentence when a date expression and a future keyword occur in
it at most ``window`` characters apart (the gap between the two matches) and the dated period ended
before ``today``. The judge stage (:mod:`rubricforge.rewards.minddr.tense_check`) then decides whether a
forecasting institution is named nearby.

Date expressions (years 1900–2199; the period ends on its last day):

* quarters: ``Q3 2024``, ``Q3 of 2024``, ``Q3 FY2024``, ``2024Q3``, ``2024-Q3``, ``third quarter of 2024``;
* halves: ``H1 2024``, ``2024H1``, ``first half of 2024``;
* months: ``March 2024``, ``Mar. 5, 2024``;
* years after a preposition: ``by 2025``, ``in 2024``, ``before``, ``until``, ``through``, ``during``,
  ``within``, ``for``, ``around``, ``of``, optionally with ``the end of`` / ``early`` / ``mid-`` / ``late``
  / ``year-end`` (all treated as the whole year, which ends on 31 December).

Future keywords: will, shall, won't, is/are going to, is/are/'s/'re + expected / projected / forecast(ed)
/ predicted / anticipated / estimated / scheduled / slated / poised / set / likely / unlikely / due /
on track / on course + to, aim(s) to, plan(s) to, intend(s) to. Past forms ("was expected to") are
correct reporting and do not match. Sentences come from :func:`rubricforge.text.sentence_spans` with
``markdown=True`` (line breaks split).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date

from rubricforge.text import sentence_spans

WINDOW = 100
CONTEXT_SENTENCES = 2
_ORD = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
_ORDS = "|".join(_ORD)
_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH_NAMES |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name} | {"sept": 9}
_MONTHS = "|".join(sorted(_MONTH_NAMES, key=len, reverse=True))


def _year(group: str) -> str:
    return rf"(?<!\d)(?P<{group}>19\d{{2}}|2[01]\d{{2}})(?!\d)"


_DATE = re.compile(
    rf"\bQ(?P<q1>[1-4])\s*(?:of\s+)?(?:FY\s*)?{_year('qy1')}"
    rf"|{_year('qy2')}\s*-?\s*Q(?P<q2>[1-4])\b"
    rf"|\b(?P<q3>{_ORDS})\s+quarter\s+of\s+{_year('qy3')}"
    rf"|\bH(?P<h1>[12])\s*(?:of\s+)?(?:FY\s*)?{_year('hy1')}"
    rf"|{_year('hy2')}\s*-?\s*H(?P<h2>[12])\b"
    rf"|\b(?P<h3>first|1st|second|2nd)\s+half\s+of\s+{_year('hy3')}"
    rf"|\b(?P<month>{_MONTHS})\.?\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?{_year('my')}"
    r"|\b(?:by|in|during|before|until|through|throughout|within|for|around|of)\s+(?:the\s+)?"
    r"(?:(?:end|start|beginning|middle)\s+of\s+|(?:early|mid|late|year-end)[-\s]?)?"
    rf"{_year('y')}(?!\s*-?\s*[QH][1-4]\b)",
    re.IGNORECASE)
_FUTURE = re.compile(
    r"\b(?:will|shall|won't|(?:is|are)\s+going\s+to|(?:(?:is|are)\s+|'s\s+|'re\s+)(?:expected|projected|forecast"
    r"|forecasted|predicted|anticipated|estimated|scheduled|slated|poised|set|likely|unlikely|due|on\s+track"
    r"|on\s+course)\s+to|aims?\s+to|plans?\s+to|intends?\s+to)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TenseCandidate:
    sentence: str
    context: str  # up to CONTEXT_SENTENCES sentences before and after, with the sentence
    matched_text: str  # from the keyword to the date (or the other way round)
    year: int
    period: str  # "2024", "2024-Q3", "2024-H1" or "2024-03"
    start: int  # of matched_text in the text
    end: int
    keyword: str
    period_end: date


def _period(m: re.Match[str]) -> tuple[int, str, date]:
    g = m.groupdict()
    for q, y in (("q1", "qy1"), ("q2", "qy2"), ("q3", "qy3")):
        if g[q]:
            year, quarter = int(g[y]), _ORD.get(g[q].lower()) or int(g[q])
            return year, f"{year}-Q{quarter}", _month_end(year, 3 * quarter)
    for h, y in (("h1", "hy1"), ("h2", "hy2"), ("h3", "hy3")):
        if g[h]:
            year, half = int(g[y]), _ORD.get(g[h].lower()) or int(g[h])
            return year, f"{year}-H{half}", _month_end(year, 6 * half)
    if g["month"]:
        year, month = int(g["my"]), _MONTH_NAMES[g["month"].lower()]
        return year, f"{year}-{month:02d}", _month_end(year, month)
    year = int(g["y"])
    return year, str(year), date(year, 12, 31)


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _gap(a: re.Match[str], b: re.Match[str]) -> int:
    return max(0, max(a.start(), b.start()) - min(a.end(), b.end()))


def find_tense_candidates(text: str, today: date, window: int = WINDOW,
                          context_sentences: int = CONTEXT_SENTENCES) -> list[TenseCandidate]:
    """Stage-1 candidates of ``text``, in order (one per dated expression; see the module docstring)."""
    spans = sentence_spans(text, markdown=True)
    out = []
    for i, (s, e) in enumerate(spans):
        sentence = text[s:e]
        keywords = list(_FUTURE.finditer(sentence))
        for d in _DATE.finditer(sentence) if keywords else ():
            year, period, end = _period(d)
            if end >= today:
                continue
            kw = min(keywords, key=lambda k: _gap(k, d))
            if _gap(kw, d) > window:
                continue
            lo, hi = min(kw.start(), d.start()), max(kw.end(), d.end())
            ctx = spans[max(0, i - context_sentences):i + context_sentences + 1]
            out.append(TenseCandidate(sentence, text[ctx[0][0]:ctx[-1][1]], sentence[lo:hi], year, period,
                                      s + lo, s + hi, kw.group(), end))
    return out
