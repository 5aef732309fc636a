"""Long-form variants (MindDR §4.6, App. 8.1; query-specific rubrics §3.2): a research-style query about
the facts of the path, with RACE rubrics — four dimensions, their weights and weighted criteria.

The query is the retained question with a report request (:data:`REPORT_REQUEST`): find the answer and show,
with a source for each, the facts that lead to it. It is written here, not by the generator: the embedded 1.5B
copied the prompt's own description of a query ("what the given facts establish and how they bear on one
another") into every query it wrote. One structured call (generator) answers the rubric
(:class:`~rubricforge.rubric_gen.race.RaceAnswer`) for that query and the path's facts, normalised by
:func:`~rubricforge.rubric_gen.race.to_race` (the model's raw weights are kept in the log); an answer whose
weights are all zero, or with no criterion at all, is a failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rubricforge.pipelines.kg.questions import facts
from rubricforge.pipelines.prompting import render
from rubricforge.rubric_gen.race import RaceAnswer, to_race
from rubricforge.schema import KGPath

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

REPORT_REQUEST = ("Write a short research report that answers this, and show, with a source for each, "
                  "the facts that lead to the answer.")


def research_query(question: str) -> str:
    """The long-form query of a retained ``question``."""
    return f"{' '.join(question.split())} {REPORT_REQUEST}"


async def write_longform(path: KGPath, question: str, client: LLMClient, max_tokens: int) -> dict[str, Any]:
    """The log record: ``race`` (RaceRubrics as JSON) or ``error``, plus the model's raw weights."""
    query = research_query(question)
    res = await client.generate("generator", [{"role": "user", "content": render(
        "kg_longform", query=query, answer=path.names[path.answer], facts=facts(path))}], output=RaceAnswer,
        stage="kg_longform", max_tokens=max_tokens)
    if not res.ok:
        return {"race": None, "error": res.error}
    race = to_race(res.value, query)
    if isinstance(race, str):
        return {"race": None, "error": race, "raw_weights": res.value.dimension_weight.model_dump()}
    return {"race": race.model_dump(mode="json"), "error": None, "raw_weights": res.value.dimension_weight.model_dump()}
