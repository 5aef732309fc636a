"""The Prefs score S(r|y) of a report under a weighted rubric set (:func:`pref_score`; Prefs Eq. 2, App. C.2;
docs/methods.md Q-3), and the preference-consistency reward R_pref (Eq. 3; docs/methods.md Q-4).

The judge rates how well the report matches each item on 1–10 (prompt C.2, ``rating: <n>``; an answer
outside 1–10 or without a rating is re-prompted, then unscored). Ratings are linearly normalised,
v̂ = (v − 1)/9, and S(r|y) = Σ_k w_k v̂_k / Σ_k w_k. Error criteria (negative weights) are matched, not
reversed: a report that commits the error rates high and the negative weight subtracts. When Σ_k w_k ≤ 0
(many error items) the denominator falls back to Σ_{w>0} w (logged); ``denominator="positive"`` always
uses it (rubricforge's DeepRubric convention). Preference accuracy and Cohen's d do not depend on the
denominator (both reports of a pair share the rubric). Any unscored item makes S unscored (None).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rubricforge.errors import UserError
from rubricforge.llm.structured import TextAnswer
from rubricforge.rewards.judging import Judge
from rubricforge.schema import Criterion

log = logging.getLogger(__name__)
Denominator = Literal["sum", "positive"]
_RATING = re.compile(r"rating\s*\**\s*[:：]?\s*\**\s*(\d+)", re.I)
_BARE = re.compile(r"\s*(\d+)\s*\.?\s*$")


def labelled_number(found: re.Match[str] | None, label: str, low: float, high: float) -> float:
    """The number of a judge's ``<label>: <number>`` line, in [low, high] (ValueError: the answer is unreadable)."""
    if found is None:
        raise ValueError(f"no '{label}: <{low:g}-{high:g}>' line in the answer")
    value = float(found.group(1))
    if not low <= value <= high:
        raise ValueError(f"{label} {value:g} is outside {low:g}-{high:g}")
    return value


class Rating(TextAnswer):
    """C.2's answer, ``rating: <integer from 1 to 10>``; an answer that is only the integer is read too
    (small models drop the label)."""

    FORMAT = "rating: <integer from 1 to 10>"
    rating: int

    @classmethod
    def from_text(cls, text: str) -> Rating:
        return cls(rating=int(labelled_number(_RATING.search(text) or _BARE.match(text), "rating", 1, 10)))


@dataclass
class PrefScore:
    value: float | None  # S(r|y); None = unscored
    ratings: dict[str, int | None] = field(default_factory=dict)  # item id -> v_k (1–10) or None
    unscored: int = 0


def item_text(c: Criterion) -> str:
    """One rubric item as the judge sees it: ``"{title}: {description}"`` (the description alone without a title)."""
    return f"{c.title}: {c.description}" if c.title else c.description


def pref_score_from_ratings(ratings: Mapping[str, int], criteria: Sequence[Criterion], denominator: Denominator = "sum"
                   ) -> float:
    """S(r|y) = Σ w_k (v_k − 1)/9 / Σ w_k (Prefs Eq. 2); see the module docstring for the denominator."""
    positive = sum(c.weight for c in criteria if c.weight > 0)
    if positive <= 0:
        raise UserError("a rubric has no positive weight", "give at least one rubric item a positive weight")
    total = sum(c.weight for c in criteria)
    if denominator == "sum" and total <= 0:
        log.info("rubric weights sum to %s <= 0: dividing by the positive weights (%s)", total, positive)
    norm = total if denominator == "sum" and total > 0 else positive
    return sum(c.weight * (ratings[c.id] - 1) / 9 for c in criteria) / norm


async def pref_score(judge: Judge, query: str, report: str, criteria: Sequence[Criterion],
                     denominator: Denominator = "sum", stage: str = "pref_item") -> PrefScore:
    """S(r|y) with one C.2 judge call per item (all concurrently; cached by the LLM client). ``stage`` names
    the calls in the judge's counts and the LLM ledger."""
    if not criteria:
        raise UserError("a rubric set has no items", "score only with a non-empty rubric")
    answers = await asyncio.gather(*(judge.ask("pref_item_score", Rating, stage=stage, query=query,
                                               report=report, rubric=item_text(c)) for c in criteria))
    ratings = {c.id: (a.rating if a is not None else None) for c, a in zip(criteria, answers, strict=True)}
    unscored = sum(v is None for v in ratings.values())
    if unscored:
        return PrefScore(None, ratings, unscored)
    return PrefScore(pref_score_from_ratings(ratings, criteria, denominator), ratings)  # type: ignore[arg-type]


def preference_reward(s_chosen: float | None, s_rejected: float | None) -> int | None:
    """R_pref (Prefs Eq. 3): +1 if S(r_acc|y) > S(r_rej|y), else −1 (a tie is −1); None if either is unscored."""
    if s_chosen is None or s_rejected is None:
        return None
    return 1 if s_chosen > s_rejected else -1


# ---------------------------------------------------------------- Table 1's judge baselines (App. C.11, C.12)

_VERDICT = re.compile(r"\[\[\s*(A|B|\d+)\s*\]\]")


class Verdict(TextAnswer):
    """C.11's / C.12's answer: the last ``[[A]]`` / ``[[B]]`` or ``[[score]]`` in the text (the explanation may
    come first)."""

    FORMAT = '"[[A]]" or "[[B]]" (pairwise), "[[score]]" with a score from 1 to 10 (pointwise)'
    verdict: str

    @classmethod
    def from_text(cls, text: str) -> Verdict:
        found = _VERDICT.findall(text)
        if not found:
            raise ValueError("no [[...]] verdict in the answer")
        if found[-1].isdigit() and not 1 <= int(found[-1]) <= 10:
            raise ValueError(f"score {found[-1]} is outside 1-10")
        return cls(verdict=found[-1])


async def pointwise_score(judge: Judge, query: str, report: str, stage: str = "pref_pointwise") -> float | None:
    """Seed 004's pointwise baseline (C.12): the judge's 1–10 score of the report alone, as (v − 1)/9."""
    got = await judge.ask("pref_pointwise", Verdict, stage=stage, question=query, answer=report)
    if got is None or not got.verdict.isdigit():
        return None
    return (int(got.verdict) - 1) / 9


async def pairwise_preference(judge: Judge, query: str, chosen: str, rejected: str, chosen_first: bool,
                              stage: str = "pref_pairwise") -> tuple[float, float] | None:
    """Seed 004's pairwise baseline (C.11): both reports in one call, the chosen one as assistant A when
    ``chosen_first``; (1, 0) when the judge prefers the chosen report, (0, 1) otherwise, None when unscored."""
    a, b = (chosen, rejected) if chosen_first else (rejected, chosen)
    got = await judge.ask("pref_pairwise", Verdict, stage=stage, question=query, answer_a=a, answer_b=b)
    if got is None or got.verdict not in ("A", "B"):
        return None
    return (1.0, 0.0) if (got.verdict == "A") == chosen_first else (0.0, 1.0)
