"""RACE rubric generation (MindDR §4.6, App. 8.1; the RACE framework of DeepResearch Bench): the one
answer model of a generated RACE rubric and the one rule that turns it into a
:class:`~rubricforge.schema.RaceRubrics` record — for :func:`generate_race_rubrics` (a rubric for a given
query), the KG long-form step's included.

:func:`to_race` normalises an answer: negative dimension weights count as 0 and the weights are divided
by their sum (rounded to 4 places); a criterion keeps its whitespace-normalised text, its stripped
explanation and its weight rounded to 3 places, and is dropped when its text is blank or its weight is
not positive (criterion weights are relative within their dimension). An answer whose dimension weights
are all zero or negative, with no criterion left, or without a query is unusable: :func:`to_race` says why.
Constrained decoding stops a string at its schema's length (:data:`CRITERION_CHARS`, :data:`EXPLANATION_CHARS`):
a text that reached it was cut, so it is taken back to its last sentence end, and a criterion with none is
dropped (never "…of both Austria-Hungary and 1").
Scoring against these rubrics is :mod:`rubricforge.rewards.minddr.race`.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, Field

from rubricforge.llm.judge import Judge
from rubricforge.llm.structured import max_length
from rubricforge.rubric_gen.prompting import PROMPTS
from rubricforge.schema import RaceCriterion, RaceRubrics

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

log = logging.getLogger(__name__)
DIMENSIONS = ("comprehensiveness", "insight", "instruction_following", "readability")
MAX_CRITERIA = 5  # per dimension; schema only (steers constrained decoding), a longer list is read whole
CRITERION_CHARS, EXPLANATION_CHARS = 200, 400
_SENTENCE_END = re.compile(r"[.;!?)](?=\s|$)")


class RaceCriterionAnswer(BaseModel):
    criterion: Annotated[str, max_length(CRITERION_CHARS)]
    explanation: Annotated[str, max_length(EXPLANATION_CHARS)]  # App. 8.1: every criterion is explained
    weight: float


class DimensionWeights(BaseModel):
    comprehensiveness: float
    insight: float
    instruction_following: float
    readability: float


_CRITERIA = Field(json_schema_extra={"maxItems": MAX_CRITERIA})


class DimensionCriteria(BaseModel):
    comprehensiveness: list[RaceCriterionAnswer] = _CRITERIA
    insight: list[RaceCriterionAnswer] = _CRITERIA
    instruction_following: list[RaceCriterionAnswer] = _CRITERIA
    readability: list[RaceCriterionAnswer] = _CRITERIA


class RaceAnswer(BaseModel):
    """A RACE rubric as a generator writes it, in the App. 8.1 layout (``criterions`` as the paper spells it)."""

    dimension_weight: DimensionWeights
    criterions: DimensionCriteria


def whole_sentences(text: str, cap: int) -> str:
    """``text`` whitespace-normalised; when it reached ``cap`` characters (cut by the schema's length), only up
    to its last sentence end ("" when it has none)."""
    text = " ".join(text.split())
    if len(text) < cap:
        return text
    ends = list(_SENTENCE_END.finditer(text))
    return text[:ends[-1].end()] if ends else ""


def to_race(answer: RaceAnswer, query: str) -> RaceRubrics | str:
    """The normalised RACE rubrics of ``answer`` for ``query``, or why the answer cannot be used."""
    raw = answer.dimension_weight.model_dump()
    total = sum(max(w, 0.0) for w in raw.values())
    criterions = {d: [RaceCriterion(criterion=whole_sentences(c.criterion, CRITERION_CHARS),
                                    explanation=whole_sentences(c.explanation, EXPLANATION_CHARS),
                                    weight=round(float(c.weight), 3))
                      for c in getattr(answer.criterions, d) if whole_sentences(c.criterion, CRITERION_CHARS) and c.weight > 0]
                  for d in DIMENSIONS}
    if total <= 0:
        return "every dimension weight is zero or negative"
    if not any(criterions.values()) or not query.strip():
        return "no criterion or no query"
    return RaceRubrics(query=" ".join(query.split()),
                       dimension_weight={d: round(max(raw[d], 0.0) / total, 4) for d in DIMENSIONS},
                       criterions=criterions)


async def generate_race_rubrics(client: LLMClient, query: str, role: str = "generator") -> RaceRubrics | None:
    """A query's RACE rubric from ``role``'s model (MindDR §4.6: a strong LLM), or None when the call
    failed or the answer is unusable (logged)."""
    got = await Judge(client, role, prompts=PROMPTS).ask("race_rubrics", RaceAnswer, stage="race_rubrics",
                                                         query=query)
    if got is None:
        return None
    race = to_race(got, query)
    if isinstance(race, str):
        log.warning("RACE rubric for %r left out: %s", query[:60], race)
        return None
    return race
