"""RACE scoring (MindDR §5.3, App. 8.3; the RACE framework of DeepResearch Bench) against a
:class:`~rubricforge.schema.RaceRubrics` record — the App. 8.1 rubric that
:mod:`rubricforge.rubric_gen.race` generates and the KG pipeline exports in its ``race_rubrics`` column.

:func:`race_score` has the judge compare a target report with a reference report using the App. 8.3
prompt (article_1 = target, article_2 = reference), criterion by criterion on 0–10. For each article a,
S_d(a) = Σ_c w_c·s_c(a) / Σ_c w_c per dimension d and S(a) = Σ_d W_d·S_d(a) / Σ_d W_d over the
dimensions that have criteria (a dimension without any is left out). The RACE score is
S(target) / (S(target) + S(reference)), per dimension and overall, in [0, 1]; 0.5 means as good as the
reference, and 0 when both score 0 (DeepResearch Bench's ``deepresearch_bench_race.py``).

As DeepResearch Bench's ``utils/score_calculator.py`` does, the sums run over the criteria the judge scored: each
judged item takes the weight of the rubric criterion it names (the exact text, else the same text ignoring case,
else the first criterion whose text contains it or is contained in it), or the mean criterion weight of its
dimension when it names none. The judge sees each criterion and its explanation, not its weight
(``format_criteria_list``). A scored dimension the judge left empty leaves the score unscored (None): DRB would
count it as 0, rubricforge does not turn a judge failure into a zero. A judge answer that leaves a criterion unnamed
(by that same matching) is resampled with what it left out named (:meth:`~rubricforge.llm.judge.Judge.ask`'s
``check``; never taken from the cache), and leaves the score unscored (None) when every attempt falls short: DRB
would score the criteria that are there, rubricforge does not score a partial judgement.

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
    """The rubric as the judge sees it: criterion and explanation per dimension, no weight (DRB's
    ``format_criteria_list``)."""
    return json.dumps({d: [{"criterion": c.criterion, "explanation": c.explanation} for c in cs]
                       for d, cs in rubrics.criterions.items()}, ensure_ascii=False, indent=2)


async def race_score(judge: Judge, query: str, target: str, reference: str, rubrics: RaceRubrics,
                     prompt: str = "race_score") -> RaceScore:
    """``prompt``: the judge prompt, MindDR App. 8.3's (``race_score``) or DeepResearch Bench's own
    (``drb_race_en`` / ``drb_race_zh``, one user message); the same variables and answer either way."""
    got = await judge.ask(prompt, RaceJudgement, stage="race", task_prompt=query, article_1=target,
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


def _matched(judgement: BaseModel, rubrics: RaceRubrics) -> dict[str, list[tuple[float, Any]]] | None:
    """Per scored dimension, each judged item with its criterion weight; None when a dimension has none."""
    out = {}
    for d in scored_dimensions(rubrics):
        if not (judged := getattr(judgement, d)):
            return None
        out[d] = [(_weight(rubrics.criterions[d], j.criterion), j) for j in judged]
    return out


def _weighted(rubrics: RaceRubrics, matched: dict[str, list[tuple[float, J]]],
              score: Callable[[J], float]) -> dict[str, float]:
    """S_d per dimension (criterion weights) and ``overall`` S (dimension weights), on 0–10."""
    out = {d: sum(w * score(j) for w, j in pairs) / total if (total := sum(w for w, _ in pairs)) else 0.0
           for d, pairs in matched.items()}
    out["overall"] = sum(rubrics.dimension_weight[d] * out[d] for d in matched) / sum(
        rubrics.dimension_weight[d] for d in matched)
    return out


def _ratio(t: float, r: float) -> float:
    return t / (t + r) if t + r > 0 else 0.0


def _named(criteria: list[RaceCriterion], named: str) -> RaceCriterion | None:
    """The criterion a judged item names, looked up as DRB's ``calculate_weighted_scores`` does: exact text
    (stripped), then case-insensitive, then containment either way; None when it names none."""
    text = named.strip()
    lower = text.lower()
    for same in (lambda c: c.criterion == text, lambda c: c.criterion.lower() == lower,
                 lambda c: lower in c.criterion.lower() or c.criterion.lower() in lower):
        if (hit := next((c for c in criteria if same(c)), None)) is not None:
            return hit
    return None


def _weight(criteria: list[RaceCriterion], named: str) -> float:
    """The weight of the criterion a judged item names (:func:`_named`), else the dimension's mean weight (DRB)."""
    hit = _named(criteria, named)
    return hit.weight if hit is not None else sum(c.weight for c in criteria) / len(criteria)


def _lacking(judgement: BaseModel, rubrics: RaceRubrics) -> str | None:
    """None when every criterion of every scored dimension is named by a judged item (:func:`_named`), else what is
    left out, for the re-prompt."""
    gaps = []
    for d in scored_dimensions(rubrics):
        judged: list[Any] = getattr(judgement, d)
        hits = {id(h) for j in judged if (h := _named(rubrics.criterions[d], j.criterion)) is not None}
        missing = [c.criterion for c in rubrics.criterions[d] if id(c) not in hits]
        if missing:
            gaps.append(f"{d} scores {len(rubrics.criterions[d]) - len(missing)} of its {len(rubrics.criterions[d])}"
                        f" criteria (missing: {missing[0][:80]!r})")
    if not gaps:
        return None
    return ("the answer does not score every criterion of <criteria_list>: " + "; ".join(gaps)
            + "; score each criterion of each dimension, named exactly as in the list")
