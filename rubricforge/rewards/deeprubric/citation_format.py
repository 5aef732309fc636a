"""The citation format reward (DeepRubric App. A.4.3, Eq. 13): R_fmt = Q·(0.7 + 0.1·d + 0.2·n), in [0, 1].

On the answer's well-formed cites (:func:`extract_claims`), with A the distinct cited ids and D the
known ids (every snippet / webpage id the rollout's tools returned):

* v = |A ∩ D| / |A| — id validity.
* m — the fraction of cited claims that are *meaningful*: at least 4 lexical units
  (:func:`lexical_units`: runs of letters/digits, each CJK character one unit) and at least 18
  characters (the span with tags removed, whitespace collapsed). Q = v·m.
* Distribution, over the k distinct valid ids, each placed at p = the midpoint of the first cited span
  naming it divided by the answer's length (so p ∈ [0, 1]):
  span = min((max p − min p) / 0.6, 1); uniformity = 1 − 2·mean_i |p_(i) − (i − ½)/k|, the deviation
  of the sorted positions from k evenly spaced ones (the centres of k equal parts of the answer, so an
  answer cut into k equally long cited spans scores 1; the mean deviation is at most ½, reached with
  every position at one end, so it lies in [0, 1]); centre = 1 − 2·|mean p − 0.5|.
  d = 0.4·span + 0.4·uniformity + 0.2·centre. With k = 1: span 0, uniformity = centre = 1 − 2|p − 0.5|.
  With k = 0 (no valid id): span = uniformity = centre = d = 0.
* n = min(k / 6, 1).

An answer without any well-formed cite (A empty, v undefined) gets every field 0, so R_fmt = 0.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from rubricforge.rewards.claims import extract_claims, lexical_units

MIN_UNITS, MIN_CHARS = 4, 18
SPAN_NORM = 0.6
COUNT_NORM = 6


@dataclass(frozen=True)
class CitationFormatScore:
    v: float
    m: float
    Q: float
    span: float
    uniformity: float
    centre: float
    d: float
    n: float
    r_fmt: float
    n_ids: int  # |A|: distinct ids cited
    n_valid: int  # k = |A ∩ D|


def is_meaningful(text: str) -> bool:
    return len(lexical_units(text)) >= MIN_UNITS and len(" ".join(text.split())) >= MIN_CHARS


def distribution(positions: list[float]) -> tuple[float, float, float]:
    """``(span, uniformity, centre)`` of positions in [0, 1] (see the module docstring); zeros when empty."""
    k = len(positions)
    if k == 0:
        return 0.0, 0.0, 0.0
    p = sorted(positions)
    span = min((p[-1] - p[0]) / SPAN_NORM, 1.0)
    uniformity = max(0.0, 1.0 - 2.0 * sum(abs(x - (i + 0.5) / k) for i, x in enumerate(p)) / k)
    centre = max(0.0, 1.0 - 2.0 * abs(sum(p) / k - 0.5))  # max(): float rounding only
    return span, uniformity, centre


def citation_format_reward(answer: str, known_ids: Collection[str]) -> CitationFormatScore:
    cited = [c for c in extract_claims(answer) if c.cited]
    ids = list(dict.fromkeys(i for c in cited for i in c.ids))
    if not ids:
        return CitationFormatScore(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0)
    first: dict[str, float] = {}
    for c in cited:
        for i in c.ids:
            if i in known_ids:
                first.setdefault(i, (c.start + c.end) / 2 / len(answer))
    v = len(first) / len(ids)
    m = sum(is_meaningful(c.text) for c in cited) / len(cited)
    span, uniformity, centre = distribution(list(first.values()))
    d = 0.4 * span + 0.4 * uniformity + 0.2 * centre
    n = min(len(first) / COUNT_NORM, 1.0)
    q = v * m
    return CitationFormatScore(v, m, q, span, uniformity, centre, d, n, q * (0.7 + 0.1 * d + 0.2 * n),
                               len(ids), len(first))
