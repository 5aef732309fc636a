"""Report-RL rewards (MindDR §5.3): the rule-based citation reward (Eq. 10) and format reward (Eq. 11),
and the report reward that adds them to the judged RACE score (Eq. 12, :func:`report_reward`).

Neither rule reward lies in [0, 1] — the paper defines R_cite ∈ {+0.1, −0.1, −1} and
R_format ∈ {−3, −2, −1, 0}; they enter R_Report = R_RACE + λc·R_cite + λf·R_format (Eq. 12) as they are.

A *citation* is one (claim, id) pair of a well-formed ``<cite id="a,b">claim</cite>`` (that cite is two
citations) inside the report's answer tag (:func:`report_body`: the whole report when the tag is
missing; reasoning outside the tag is not counted). It is *valid* when the id names a known passage
and ``relevance(claim, passage) ≥ τ``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rubricforge.rewards.claims import cite_problems, extract_claims, lexical_units

Relevance = Callable[[str, str], float]
DEFAULT_TAU = 0.5
THRESHOLD = 0.7  # n_gen and n_valid are compared with 0.7·n_ref
STOPWORDS = frozenset({"a", "an", "and", "are", "as", "at", "be", "been", "by", "for", "from", "has", "have", "in",
                       "is", "it", "its", "of", "on", "or", "that", "the", "their", "this", "to", "was", "were",
                       "which", "with"})


def report_citation_reward(n_gen: int, n_ref: int, n_valid: int) -> float:
    """Eq. 10: +0.1 if n_gen ≥ 0.7·n_ref and n_valid ≥ 0.7·n_ref; −0.1 if only n_gen is; −1 otherwise.

    When the reference has no citation (n_ref = 0) both conditions hold and the reward is +0.1 — the
    formula as written: there is no reference count to fall short of.
    """
    if min(n_gen, n_ref, n_valid) < 0 or n_valid > n_gen:
        raise ValueError(f"need 0 <= n_valid <= n_gen and n_ref >= 0 (got {n_gen=}, {n_ref=}, {n_valid=})")
    need = THRESHOLD * n_ref
    if n_gen < need:
        return -1.0
    return 0.1 if n_valid >= need else -0.1


def report_reward(race: float | None, cite: float, fmt: float, lambda_cite: float, lambda_format: float
                  ) -> float | None:
    """Eq. 12: R_Report = R_RACE + λc·R_cite + λf·R_format; None (unscored) when R_RACE is unscored.
    The paper gives no λ values (rubricforge's defaults: ``reward.report_lambda_cite`` / ``_format``)."""
    return None if race is None else race + lambda_cite * cite + lambda_format * fmt


def _content_tokens(text: str) -> set[str]:
    return {t for t in (u.casefold() for u in lexical_units(text)) if t not in STOPWORDS}


def lexical_relevance(claim: str, passage: str) -> float:
    """The share of the claim's distinct content tokens (lexical units, case-folded, without a few
    English stop words) that occur in the passage, in [0, 1]; 0 for a claim without content tokens."""
    tokens = _content_tokens(claim)
    return len(tokens & _content_tokens(passage)) / len(tokens) if tokens else 0.0


@dataclass(frozen=True)
class CitationCount:
    n_gen: int
    n_valid: int
    pairs: list[tuple[str, str, float | None]] = field(default_factory=list)  # (claim, id, relevance or None if unknown)


def count_citations(report: str, tag: str = "final_answer") -> int:
    """The number of (claim, id) citations in :func:`report_body` (e.g. n_ref of the reference report)."""
    return sum(len(c.ids) for c in extract_claims(report_body(report, tag)))


def count_report_citations(report: str, passages: Mapping[str, str], relevance: Relevance = lexical_relevance,
                           tau: float = DEFAULT_TAU, tag: str = "final_answer") -> CitationCount:
    """n_gen and n_valid of :func:`report_body`; ``passages`` maps an id to the passage text it names."""
    pairs: list[tuple[str, str, float | None]] = []
    for claim in extract_claims(report_body(report, tag)):
        for cid in claim.ids:
            passage = passages.get(cid)
            pairs.append((claim.text, cid, None if passage is None else relevance(claim.text, passage)))
    return CitationCount(len(pairs), sum(r is not None and r >= tau for _, _, r in pairs), pairs)


# ------------------------------------------------------------ format (Eq. 11)


@dataclass(frozen=True)
class FormatViolations:
    v_tag: int
    v_md: int
    v_ref: int
    details: list[str]

    @property
    def reward(self) -> float:
        """Eq. 11: −(v_tag + v_md + v_ref), in [−3, 0]."""
        return -float(self.v_tag + self.v_md + self.v_ref)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_ORDERED = re.compile(r"^(\s*)(\d{1,9})[.)]\s+\S")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_SEPARATOR_CELL = re.compile(r"^\s*:?-+:?\s*$")


def _cells(row: str) -> list[str]:
    row = row.strip()[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return _CELL_SPLIT.split(row)


def _table_problems(rows: list[tuple[int, str]]) -> list[str]:
    (first_line, header), *rest = rows
    if not rest or not all(_SEPARATOR_CELL.match(c) for c in _cells(rest[0][1])) \
            or all(_SEPARATOR_CELL.match(c) for c in _cells(header)):
        return [f"table at line {first_line} has no header and separator row"]
    width = len(_cells(header))
    return [f"table row at line {line} has {len(_cells(row))} cells, the header {width}"
            for line, row in rest if len(_cells(row)) != width]


def markdown_problems(text: str) -> list[str]:
    """Markdown that renders wrongly: an unclosed code fence; ordered-list numbering that skips or
    restarts among items of the same indent within a section (a heading starts a new section; an item
    clears the numbering of deeper indents); a table (consecutive lines starting with ``|``) without a
    header and separator row, or with a row whose cell count differs from the header's. Lines inside
    code fences are not checked. Lines are numbered from 1."""
    problems: list[str] = []
    fence: tuple[str, int, int] | None = None  # (char, length, line)
    numbers: dict[int, int] = {}  # indent -> last item number
    table: list[tuple[int, str]] = []
    for line_no, line in enumerate(text.split("\n"), 1):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not line[m.end():].strip():
                fence = None
            continue
        if line.strip().startswith("|"):
            table.append((line_no, line))
            continue
        if table:
            problems += _table_problems(table)
            table = []
        if m:
            fence = (m.group(1)[0], len(m.group(1)), line_no)
        elif _HEADING.match(line):
            numbers.clear()
        elif item := _ORDERED.match(line):
            indent, number = len(item.group(1).expandtabs(4)), int(item.group(2))
            if indent in numbers and number != numbers[indent] + 1:
                problems.append(f"list item numbered {number} after {numbers[indent]} at line {line_no}")
            numbers = {i: n for i, n in numbers.items() if i < indent} | {indent: number}
    if table:
        problems += _table_problems(table)
    if fence is not None:
        problems.append(f"code fence opened at line {fence[2]} is never closed")
    return problems


def _locate(report: str, tag: str) -> tuple[str, list[str]]:
    """The report's body (from the first ``<tag>`` to the next ``</tag>``, else the whole report) and
    what is wrong with its enclosing tags."""
    opens = list(re.finditer(rf"<\s*{re.escape(tag)}\s*>", report, re.IGNORECASE))
    closes = list(re.finditer(rf"<\s*/\s*{re.escape(tag)}\s*>", report, re.IGNORECASE))
    problems = []
    if len(opens) != 1 or len(closes) != 1:
        problems.append(f"{len(opens)} <{tag}> and {len(closes)} </{tag}> tags (need one of each)")
    closing = next((c for c in closes if opens and c.start() >= opens[0].end()), None)
    if opens and closing is not None:
        body = report[opens[0].end():closing.start()]
        if not body.strip():
            problems.append(f"<{tag}> is empty")
        return body, problems
    if opens or closes:
        problems.append(f"<{tag}> is not closed after it opens")
    return report, problems


def report_body(report: str, tag: str = "final_answer") -> str:
    """The text inside the report's first ``<tag>`` … ``</tag>`` pair; the whole report without one."""
    return _locate(report, tag)[0]


def report_format_violations(report: str, tag: str = "final_answer") -> FormatViolations:
    """The three indicators of Eq. 11.

    * v_tag: the report is not enclosed by exactly one ``<tag>`` … ``</tag>`` pair, in that order, around
      non-blank text. ``tag`` is ``final_answer`` in MindDR, ``answer`` in DeepRubric.
    * v_md: :func:`markdown_problems` finds anything.
    * v_ref: malformed cite markup (:func:`cite_problems`: a cite without ids, an empty id, a nested,
      unclosed or stray cite tag, an empty cited span).

    v_md and v_ref look at :func:`report_body`; line numbers and offsets in ``details`` are into it.
    """
    body, tag_problems = _locate(report, tag)
    md, ref = markdown_problems(body), cite_problems(body)
    details = [f"tag: {p}" for p in tag_problems] + [f"markdown: {p}" for p in md] + [f"cite: {p}" for p in ref]
    return FormatViolations(int(bool(tag_problems)), int(bool(md)), int(bool(ref)), details)


def report_format_reward(report: str, tag: str = "final_answer") -> float:
    """Eq. 11: −(v_tag + v_md + v_ref) ∈ [−3, 0] (see :func:`report_format_violations`)."""
    return report_format_violations(report, tag).reward
