"""RACE scoring (MindDR §5.3, App. 8.3; the RACE framework of DeepResearch Bench) against a
:class:`~rubricforge.schema.RaceRubrics` record — the App. 8.1 rubric that
:mod:`rubricforge.rubric_gen.race` generates and the KG pipeline exports in its ``race_rubrics`` column.

:func:`race_score` has the judge compare a target report with a reference report using the App. 8.3
prompt (article_1 = target, article_2 = reference), criterion by criterion on 0–10. For each article a,
S_d(a) = Σ_c w_c·s_c(a) / Σ_c w_c per dimension d and S(a) = Σ_d W_d·S_d(a) / Σ_d W_d over the
dimensions that have criteria (a dimension without any is left out). The RACE score is
S(target) / (S(target) + S(reference)), per dimension and overall, in [0, 1]; 0.5 means as good as the
reference (also when both score 0). A judge answer that does not cover every criterion of the rubric
(matched by text, else by position within its dimension) is resampled with what it left out named
(:meth:`~rubricforge.llm.judge.Judge.ask`'s ``check``; never taken from the cache), and leaves the score unscored
(None) when every attempt falls short.

:func:`race_pointwise` is RACE without a reference report (the ``no_reference`` mode of DeepResearch Bench
forks): the judge scores the one article 0–10 per criterion and the score is S(target) / 10, per dimension
and overall, with the same weights.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from rubricforge.errors import UserError
from rubricforge.llm.structured import Str200, Str400
from rubricforge.rewards.judging import Judge
from rubricforge.rubric_gen.race import DIMENSIONS
from rubricforge.schema import RaceCriterion, RaceRubrics


class Comparison(BaseModel):
    criterion: Str200
    analysis: Str400 = ""
    article_1_score: float = Field(ge=0, le=10)
    article_2_score: float = Field(ge=0, le=10)


class RaceJudgement(BaseModel):
    comprehensiveness: list[Comparison]
    insight: list[Comparison]
    instruction_following: list[Comparison]
    readability: list[Comparison]


class PointScore(BaseModel):
    criterion: Str200
    analysis: Str400 = ""
    score: float = Field(ge=0, le=10)


class PointwiseJudgement(BaseModel):
    comprehensiveness: list[PointScore]
    insight: list[PointScore]
    instruction_following: list[PointScore]
    readability: list[PointScore]


J = TypeVar("J", Comparison, PointScore)


@dataclass
class RaceScore:
    value: float | None  # overall RACE score in [0, 1]; None = unscored
    dimensions: dict[str, float] = field(default_factory=dict)  # per-dimension RACE score
    target: dict[str, float] = field(default_factory=dict)  # S_d(target) on 0–10, plus "overall"
    reference: dict[str, float] = field(default_factory=dict)


def parse_race_rubrics(raw: Any, where: str) -> RaceRubrics:
    """A ``race_rubrics`` column (JSON text or a mapping) as :class:`RaceRubrics`; a UserError naming ``where``
    when it is empty or not a RACE rubric."""
    if raw == "":
        raise UserError(f"{where} has no RACE rubric (an empty race_rubrics)", "score only examples with one")
    try:
        return RaceRubrics.model_validate(json.loads(raw) if isinstance(raw, str) else raw)
    except ValueError as exc:
        raise UserError(f"{where}: race_rubrics is not a RACE rubric ({str(exc).splitlines()[0]})",
                        "give {query, dimension_weight, criterions} as the KG pipeline exports it") from None


def _criteria_list(rubrics: RaceRubrics) -> str:
    return json.dumps({d: [c.model_dump() for c in cs] for d, cs in rubrics.criterions.items()},
                      ensure_ascii=False, indent=1)


async def race_score(judge: Judge, query: str, target: str, reference: str, rubrics: RaceRubrics) -> RaceScore:
    got = await judge.ask("race_score", RaceJudgement, stage="race", task_prompt=query, article_1=target,
                          article_2=reference, criteria_list=_criteria_list(rubrics),
                          check=lambda j: _lacking(j, rubrics))
    if got is None:
        return RaceScore(None)
    return score_judgement(got, rubrics)


async def race_pointwise(judge: Judge, query: str, target: str, rubrics: RaceRubrics) -> RaceScore:
    """RACE without a reference report (see the module docstring); ``reference`` stays empty."""
    got = await judge.ask("race_pointwise", PointwiseJudgement, stage="race_pointwise", task_prompt=query,
                          article=target, criteria_list=_criteria_list(rubrics), check=lambda j: _lacking(j, rubrics))
    if got is None:
        return RaceScore(None)
    return score_pointwise(got, rubrics)


def score_judgement(judgement: RaceJudgement, rubrics: RaceRubrics) -> RaceScore:
    """The RACE arithmetic over a judge's comparisons (see the module docstring)."""
    matched = _matched(judgement, rubrics)
    if matched is None:
        return RaceScore(None)
    target = _weighted(rubrics, matched, lambda j: j.article_1_score)
    reference = _weighted(rubrics, matched, lambda j: j.article_2_score)
    ratio = {d: _ratio(target[d], reference[d]) for d in target}
    overall = ratio.pop("overall")
    return RaceScore(overall, ratio, target, reference)


def score_pointwise(judgement: PointwiseJudgement, rubrics: RaceRubrics) -> RaceScore:
    """The pointwise arithmetic: S_d(target) / 10 per dimension and overall."""
    matched = _matched(judgement, rubrics)
    if matched is None:
        return RaceScore(None)
    target = _weighted(rubrics, matched, lambda j: j.score)
    scaled = {d: s / 10 for d, s in target.items()}
    overall = scaled.pop("overall")
    return RaceScore(overall, scaled, target)


def scored_dimensions(rubrics: RaceRubrics) -> list[str]:
    scored = [d for d in DIMENSIONS if rubrics.criterions.get(d) and rubrics.dimension_weight.get(d, 0) > 0]
    if not scored:
        raise UserError(f"the RACE rubric of '{rubrics.query[:60]}' has no weighted dimension with criteria",
                        "regenerate it")
    return scored


def _matched(judgement: BaseModel, rubrics: RaceRubrics) -> dict[str, list[tuple[RaceCriterion, Any]]] | None:
    """Per scored dimension, each criterion with the judge's verdict on it; None when one is missing."""
    out = {}
    for d in scored_dimensions(rubrics):
        if (pairs := _match(rubrics.criterions[d], getattr(judgement, d))) is None:
            return None
        out[d] = pairs
    return out


def _lacking(judgement: BaseModel, rubrics: RaceRubrics) -> str | None:
    """None when ``judgement`` scores every criterion of the rubric (as :func:`_matched` pairs them), else what it
    leaves out, for the re-prompt."""
    gaps = []
    for d in scored_dimensions(rubrics):
        judged: list[Any] = getattr(judgement, d)
        if _match(rubrics.criterions[d], judged) is None:
            seen = {_norm(j.criterion) for j in judged}
            missing = [c.criterion for c in rubrics.criterions[d] if _norm(c.criterion) not in seen]
            gaps.append(f"{d} scores {len(judged)} of its {len(rubrics.criterions[d])} criteria"
                        + (f" (missing: {missing[0][:80]!r})" if missing else ""))
    if not gaps:
        return None
    return ("the answer does not score every criterion of <criteria_list>: " + "; ".join(gaps)
            + "; score each criterion of each dimension, named exactly as in the list")


def _weighted(rubrics: RaceRubrics, matched: dict[str, list[tuple[RaceCriterion, J]]],
              score: Callable[[J], float]) -> dict[str, float]:
    """S_d per dimension (criterion weights) and ``overall`` S (dimension weights), on 0–10."""
    out = {d: sum(c.weight * score(j) for c, j in pairs) / sum(c.weight for c, _ in pairs)
           for d, pairs in matched.items()}
    out["overall"] = sum(rubrics.dimension_weight[d] * out[d] for d in matched) / sum(
        rubrics.dimension_weight[d] for d in matched)
    return out


def _ratio(t: float, r: float) -> float:
    return t / (t + r) if t + r > 0 else 0.5


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .[]\"'")


def _match(criteria: list[RaceCriterion], judged: list[J]) -> list[tuple[RaceCriterion, J]] | None:
    """Each rubric criterion paired with the judge's comparison of it: by text, else by position."""
    by_text = {_norm(j.criterion): j for j in judged}
    if all(_norm(c.criterion) in by_text for c in criteria):
        return [(c, by_text[_norm(c.criterion)]) for c in criteria]
    if len(judged) == len(criteria):
        return list(zip(criteria, judged, strict=True))
    return None
