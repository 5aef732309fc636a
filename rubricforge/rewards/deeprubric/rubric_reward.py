"""The rubric reward (DeepRubric Eq. 4 / App. A.1): an LLM judge scores the report against each criterion
on the 0–4 scale of Figure 5, normalised by 4, and the scores are averaged with the criteria's weights.

Normalisation with negative weights: Eq. 4 divides by Σ w_r, which is zero or negative once a rubric has
negative-weight (debunking / pitfall) criteria. rubricforge divides by the sum of the *positive* weights
instead (identical to Eq. 4 when every weight is positive): a negative criterion that the report
satisfies subtracts |w|·s from the numerator. The result, ``raw``, can fall below 0 in that case, so
``value`` is ``raw`` clipped to [0, 1] and both are returned. A criterion without a weight is an error
(never silently weighted 1).

Two modes: ``per_criterion`` (the paper: one Figure 5 call per criterion, all concurrently) and
``batched`` (every criterion in one call; cheaper; an answer that leaves a criterion out is resampled, see
:mod:`rubricforge.llm.judge`). If any criterion is unscored the reward is None.
A rollout without a final answer satisfies no criterion: its reward is 0 and no judge is called.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from rubricforge.errors import UserError
from rubricforge.llm.structured import Str40
from rubricforge.rewards.judging import Judge
from rubricforge.schema import Criterion

JudgeMode = Literal["per_criterion", "batched"]
MAX_SCORE = 4


class CriterionScore(BaseModel):
    score: int = Field(ge=0, le=MAX_SCORE)


class _IdScore(BaseModel):
    id: Str40
    score: int = Field(ge=0, le=MAX_SCORE)


class BatchedScores(BaseModel):
    scores: list[_IdScore]


@dataclass
class RubricScore:
    value: float | None  # in [0, 1]; None = unscored
    raw: float | None  # before clipping (below 0 only with negative weights)
    per_criterion: dict[str, float | None] = field(default_factory=dict)  # id -> s_r in [0, 1] or None
    unscored: int = 0


HEALTHBENCH_KEYS = {"criterion": "description", "points": "weight"}  # HealthBench's names for the same fields


def criteria_from(rubrics: Iterable[Criterion | Mapping[str, Any]], where: str = "rubrics") -> list[Criterion]:
    """Criteria from a dataset column (dicts) or schema objects; a missing or non-numeric weight is an error.

    Accepted forms: rubricforge's ``{id, type, description, weight, ...}``, and ``{title, description, weight}``
    without ``type`` or ``id`` (DR Tulu, Prefs, HOTE; HealthBench's ``{criterion, points}`` likewise). A
    missing id becomes ``c<n>``; a rubric with a title but no description is judged on its title."""
    out = []
    for n, r in enumerate(rubrics):
        if isinstance(r, Criterion):
            out.append(r)
            continue
        if not isinstance(r, Mapping):
            raise UserError(f"{where}[{n}] is not a rubric object ({type(r).__name__})",
                            "give each rubric as {title, description, weight} or rubricforge's criterion fields")
        r = {HEALTHBENCH_KEYS.get(k, k): v for k, v in r.items()}
        if r.get("weight") is None:
            raise UserError(f"{where}[{n}] (id {r.get('id')!r}) has no weight",
                            "give every criterion a numeric weight; rubricforge never assumes one")
        if not (r.get("description") or r.get("title")):
            raise UserError(f"{where}[{n}] has no 'description' (nor a 'title' to judge it by)",
                            "give each criterion its text; other formats convert with "
                            "`rubricforge convert IN OUT.jsonl --to rubricforge`")
        known = {k: v for k, v in r.items() if k in Criterion.model_fields}
        if not known.get("description") and known.get("title"):
            known["description"] = known["title"]
        try:
            out.append(Criterion.model_validate({**known, "id": str(r.get("id") or f"c{n + 1}")}))
        except ValueError as exc:
            raise UserError(f"{where}[{n}] is not a valid criterion ({str(exc).splitlines()[0]})",
                            "see the dataset card for the rubric fields") from None
    return out


def criterion_text(c: Criterion) -> str:
    """What the judge sees (App. A.1): id, type and description, plus the supporting evidence of a factual
    criterion; a rubric without a type (``{title, description, weight}``) shows its title instead."""
    if c.type is None:
        title = f"Title: {c.title}\n" if c.title and c.title.strip() != c.description.strip() else ""
        return f"ID: {c.id}\n{title}Description: {c.description}"
    text = f"ID: {c.id}\nType: {c.type}\nDescription: {c.description}"
    if c.type == "factual" and c.evidence:
        text += "\nEvidence:\n" + "\n".join(f"- {e}" for e in c.evidence)
    return text


def weighted_mean(scores: Mapping[str, float], criteria: list[Criterion]) -> float:
    """Σ w·s / Σ_{w>0} w (Eq. 4; see the module docstring for negative weights)."""
    positive = sum(c.weight for c in criteria if c.weight > 0)
    if positive <= 0:
        raise UserError("a rubric has no positive weight", "give at least one criterion a positive weight")
    return sum(c.weight * scores[c.id] for c in criteria) / positive


async def rubric_reward(judge: Judge, question: str, answer: str | None, criteria: list[Criterion],
                        mode: JudgeMode = "per_criterion", seed: int | None = None) -> RubricScore:
    """``seed`` overrides the judge role's seed (independent samples, for audits)."""
    if not criteria:
        raise UserError("an example has no rubric criteria", "score only examples with rubrics")
    if answer is None or not answer.strip():
        zeros: dict[str, float | None] = {c.id: 0.0 for c in criteria}
        return RubricScore(0.0, 0.0, zeros)
    if mode == "per_criterion":
        per = await _per_criterion(judge, question, answer, criteria, seed)
    elif mode == "batched":
        per = await _batched(judge, question, answer, criteria, seed)
    else:
        raise UserError(f"unknown judge mode '{mode}'", "use per_criterion or batched")
    unscored = sum(v is None for v in per.values())
    if unscored:
        return RubricScore(None, None, per, unscored)
    raw = weighted_mean(per, criteria)  # type: ignore[arg-type]
    return RubricScore(min(1.0, max(0.0, raw)), raw, per)


async def _per_criterion(judge: Judge, question: str, answer: str, criteria: list[Criterion],
                         seed: int | None) -> dict[str, float | None]:
    answers = await asyncio.gather(*(judge.ask("rubric_score", CriterionScore, stage="rubric", seed=seed,
                                               question=question,
                                               answer=answer, criterion_text=criterion_text(c)) for c in criteria))
    return {c.id: (a.score / MAX_SCORE if a is not None else None) for c, a in zip(criteria, answers, strict=True)}


async def _batched(judge: Judge, question: str, answer: str, criteria: list[Criterion],
                   seed: int | None) -> dict[str, float | None]:
    listing = "\n".join(f'<criterion id="{c.id}">{criterion_text(c)}</criterion>' for c in criteria)
    got = await judge.ask("rubric_score_batched", BatchedScores, stage="rubric_batched", seed=seed, question=question,
                          answer=answer, criteria=listing, check=lambda got: _lacking(got, criteria))
    by_id = {s.id.strip(): s.score / MAX_SCORE for s in got.scores} if got is not None else {}
    return {c.id: by_id.get(c.id) for c in criteria}  # an id the judge left out (after resampling) is unscored


def _lacking(got: BatchedScores, criteria: list[Criterion]) -> str | None:
    """None when a batched answer scores every criterion, else which ids it leaves out (for the re-prompt)."""
    seen = {s.id.strip() for s in got.scores}
    missing = [c.id for c in criteria if c.id not in seen]
    return (f"the answer leaves out criteria {', '.join(missing[:10])}: give a score for every criterion id"
            if missing else None)
