"""HOTE's rubric reward (Eq. 2): r_i = Σ_{(R,w)} w·Judge(o_i, R) / Σ_{(R,w)} |w|.

Per rubric the fixed judge answers 0 or 1 (prompt ``hote_judge``): 1 = the response satisfies a positive
rubric, or exhibits the flaw a negative one (w < 0) describes; the sign is carried by the weight (the
the reading (docs/methods.md H-1) of "the judge's reward for each rubric has only 0 or ±1", which keeps Eq. 5's "1 = max
average reward" true). So r_i ∈ [−Σ_{w<0}|w| / Σ|w|, Σ_{w>0} w / Σ|w|] ⊆ [−1, 1]. A failed judge call on
any rubric leaves the response unscored (None, never 0); a response without a final answer passes no rubric
(every J = 0, r = 0) and costs no judge call. Works over a static rubric set (the dataset's ``rubrics``) and
over an evolving bank's persistent ∪ active rubrics alike (:mod:`rubricforge.rubric_gen.bank`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from rubricforge.errors import UserError
from rubricforge.rewards.judging import Judge
from rubricforge.schema import Criterion


class BinaryVerdict(BaseModel):
    score: Literal[0, 1]


@dataclass
class HoteScore:
    value: float | None  # Eq. 2, in [-1, 1]; None = unscored
    per_rubric: dict[str, int | None] = field(default_factory=dict)  # id -> J in {0, 1}, None = failed call
    unscored: int = 0


def eq2(judgments: Mapping[str, float], rubrics: Sequence[Criterion]) -> float:
    """HOTE Eq. 2 over ``rubrics``: Σ w·J / Σ |w| (every rubric must have its J)."""
    total = sum(abs(r.weight) for r in rubrics)
    if total <= 0:
        raise UserError("a rubric set has no non-zero weight", "give every rubric a non-zero weight")
    return sum(r.weight * judgments[r.id] for r in rubrics) / total


def eq2_subset(score: HoteScore, rubrics: Sequence[Criterion], ids: Collection[str]) -> float | None:
    """Eq. 2 restricted to the rubrics whose id is in ``ids`` (e.g. persistent or active only); None when the
    subset is empty or unscored."""
    subset = [r for r in rubrics if r.id in ids]
    if not subset or any(score.per_rubric.get(r.id) is None for r in subset):
        return None
    return eq2(score.per_rubric, subset)  # type: ignore[arg-type]


def rubric_line(r: Criterion) -> str:
    """The rubric as the judge sees it; a negative rubric says so, since J = 1 then means the flaw is there."""
    text = f"{r.title}: {r.description}" if r.title and r.title.strip() != r.description.strip() else r.description
    return f"[negative: answer 1 if the response shows this flaw] {text}" if r.weight < 0 else text


async def hote_reward(judge: Judge, question: str, answer: str | None, rubrics: Sequence[Criterion]) -> HoteScore:
    """Eq. 2 for one response: one binary judge call per rubric, concurrently."""
    if not rubrics:
        raise UserError("an example has no rubrics", "score only examples with rubrics")
    if answer is None or not answer.strip():
        return HoteScore(0.0, {r.id: 0 for r in rubrics})
    got = await asyncio.gather(*(judge.ask("hote_judge", BinaryVerdict, stage="hote", question=question, answer=answer,
                                           rubric=rubric_line(r)) for r in rubrics))
    per: dict[str, int | None] = {r.id: (g.score if g is not None else None) for r, g in zip(rubrics, got, strict=True)}
    unscored = sum(v is None for v in per.values())
    if unscored:
        return HoteScore(None, per, unscored)
    return HoteScore(eq2(per, rubrics), per)  # type: ignore[arg-type]


def proposer_reward(judgments: Mapping[str, Sequence[int | None]]) -> float | None:
    """HOTE Eq. 5 for one synthetic task: r^p = (1/M) Σ_R 𝕀[∃j: J_jR = 1] · (1 − (1/G) Σ_j J_jR), over its M meta
    rubrics (all w > 0; ``judgments``: rubric id -> the G solver responses' J at the next step). 0 when nobody
    or everybody passes a rubric, at most 1 − 1/G ("challenging but solvable"). Any unscored J ⇒ None."""
    if not judgments:
        raise ValueError("Eq. 5 needs at least one meta rubric")
    terms = []
    for values in judgments.values():
        if not values or any(v is None for v in values):
            return None
        mean = sum(values) / len(values)  # type: ignore[arg-type]
        terms.append((1.0 - mean) if max(values) == 1 else 0.0)  # type: ignore[type-var]
    return sum(terms) / len(terms)
