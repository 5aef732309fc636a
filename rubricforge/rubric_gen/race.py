"""RACE rubrics and scoring (MindDR §4.6, §5.3, App. 8.1, 8.3; the RACE framework of DeepResearch Bench).

:func:`generate_race_rubrics` asks a strong model (the generator role by default) for a query's rubric in
the App. 8.1 layout: four dimension weights and, per dimension, criteria with explanations and weights.
Dimension weights are normalised to sum to 1 after generation; criterion weights are relative within
their dimension.

:func:`race_score` has the judge compare a target report with a reference report using the App. 8.3
prompt (article_1 = target, article_2 = reference), criterion by criterion on 0–10. For each article a,
S_d(a) = Σ_c w_c·s_c(a) / Σ_c w_c per dimension d and S(a) = Σ_d W_d·S_d(a). The RACE score is
S(target) / (S(target) + S(reference)), per dimension and overall, in [0, 1]; 0.5 means as good as the
reference (also when both score 0). A judge answer that does not cover every criterion of the rubric
(matched by text, else by position within its dimension) leaves the score unscored (None).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import BaseModel, Field, model_validator

from rubricforge.llm.structured import bounded_str
from rubricforge.rubric_gen.judging import Judge

DIMENSIONS = ("comprehensiveness", "insight", "instruction_following", "readability")


class RaceCriterion(BaseModel):
    criterion: bounded_str(200)
    explanation: bounded_str(400) = ""
    weight: float = Field(gt=0)


class DimensionWeights(BaseModel):
    comprehensiveness: float = Field(ge=0)
    insight: float = Field(ge=0)
    instruction_following: float = Field(ge=0)
    readability: float = Field(ge=0)

    @model_validator(mode="after")
    def _positive(self) -> DimensionWeights:
        if sum(self.as_dict().values()) <= 0:
            raise ValueError("at least one dimension weight must be positive")
        return self

    def as_dict(self) -> dict[str, float]:
        return {d: getattr(self, d) for d in DIMENSIONS}


class Criterions(BaseModel):
    comprehensiveness: list[RaceCriterion] = Field(min_length=1, json_schema_extra={"maxItems": 5})
    insight: list[RaceCriterion] = Field(min_length=1, json_schema_extra={"maxItems": 5})
    instruction_following: list[RaceCriterion] = Field(min_length=1, json_schema_extra={"maxItems": 5})
    readability: list[RaceCriterion] = Field(min_length=1, json_schema_extra={"maxItems": 5})


class RaceRubrics(BaseModel):
    """One query's RACE rubric, in the App. 8.1 layout (``criterions`` as the paper spells it)."""

    dimension_weight: DimensionWeights
    criterions: Criterions

    def normalised(self) -> RaceRubrics:
        """The same rubric with dimension weights summing to 1."""
        w = self.dimension_weight.as_dict()
        total = sum(w.values())
        return self.model_copy(update={"dimension_weight": DimensionWeights(**{d: v / total for d, v in w.items()})})

    def criteria(self, dimension: str) -> list[RaceCriterion]:
        return getattr(self.criterions, dimension)


class Comparison(BaseModel):
    criterion: bounded_str(200)
    analysis: bounded_str(400) = ""
    article_1_score: float = Field(ge=0, le=10)
    article_2_score: float = Field(ge=0, le=10)


class RaceJudgement(BaseModel):
    comprehensiveness: list[Comparison]
    insight: list[Comparison]
    instruction_following: list[Comparison]
    readability: list[Comparison]


@dataclass
class RaceScore:
    value: float | None  # overall RACE score in [0, 1]; None = unscored
    dimensions: dict[str, float] = field(default_factory=dict)  # per-dimension RACE score
    target: dict[str, float] = field(default_factory=dict)  # S_d(target) on 0–10, plus "overall"
    reference: dict[str, float] = field(default_factory=dict)


async def generate_race_rubrics(judge: Judge, query: str) -> RaceRubrics | None:
    """A query's RACE rubric from ``judge``'s model (pass a Judge over the generator role), or None."""
    got = await judge.ask("race_rubrics", RaceRubrics, stage="race_rubrics", query=query)
    return None if got is None else got.normalised()


async def race_score(judge: Judge, query: str, target: str, reference: str, rubrics: RaceRubrics) -> RaceScore:
    criteria_list = json.dumps(rubrics.criterions.model_dump(), ensure_ascii=False, indent=1)
    got = await judge.ask("race_score", RaceJudgement, stage="race", task_prompt=query, article_1=target,
                          article_2=reference, criteria_list=criteria_list)
    if got is None:
        return RaceScore(None)
    return score_judgement(got, rubrics)


def score_judgement(judgement: RaceJudgement, rubrics: RaceRubrics) -> RaceScore:
    """The RACE arithmetic over a judge's comparisons (see the module docstring)."""
    weights = rubrics.normalised().dimension_weight.as_dict()
    target, reference = {}, {}
    for d in DIMENSIONS:
        matched = _match(rubrics.criteria(d), getattr(judgement, d))
        if matched is None:
            return RaceScore(None)
        total_w = sum(c.weight for c, _ in matched)
        target[d] = sum(c.weight * j.article_1_score for c, j in matched) / total_w
        reference[d] = sum(c.weight * j.article_2_score for c, j in matched) / total_w
    target["overall"] = sum(weights[d] * target[d] for d in DIMENSIONS)
    reference["overall"] = sum(weights[d] * reference[d] for d in DIMENSIONS)
    ratio = {d: _ratio(target[d], reference[d]) for d in (*DIMENSIONS, "overall")}
    overall = ratio.pop("overall")
    return RaceScore(overall, ratio, target, reference)


def _ratio(t: float, r: float) -> float:
    return t / (t + r) if t + r > 0 else 0.5


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .[]\"'")


def _match(criteria: list[RaceCriterion], judged: list[Comparison]) -> list[tuple[RaceCriterion, Comparison]] | None:
    """Each rubric criterion paired with the judge's comparison of it: by text, else by position."""
    by_text = {_norm(j.criterion): j for j in judged}
    if all(_norm(c.criterion) in by_text for c in criteria):
        return [(c, by_text[_norm(c.criterion)]) for c in criteria]
    if len(judged) == len(criteria):
        return list(zip(criteria, judged))
    return None
