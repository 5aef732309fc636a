"""Long-form variants (MindDR §4.6, App. 8.1; query-specific rubrics §3.2): a research-style query about
the facts of the path (each hop's relation and evidence sentence, not a list of names to "connect"), with
RACE rubrics — four dimensions, their weights and weighted criteria.

One structured call (generator) answering :class:`~rubricforge.rubric_gen.race.LongFormAnswer`, normalised
by :func:`~rubricforge.rubric_gen.race.to_race` (the model's raw weights are kept in the log); an answer
whose weights are all zero, or with no criterion at all, is a failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rubricforge.pipelines.kg.questions import facts
from rubricforge.pipelines.prompting import render
from rubricforge.rubric_gen.race import LongFormAnswer, to_race
from rubricforge.schema import KGPath

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient


async def write_longform(path: KGPath, client: LLMClient, max_tokens: int) -> dict[str, Any]:
    """The log record: ``race`` (RaceRubrics as JSON) or ``error``, plus the model's raw weights."""
    res = await client.generate("generator", [{"role": "user", "content": render(
        "kg_longform", facts=facts(path))}], output=LongFormAnswer, stage="kg_longform",
        max_tokens=max_tokens)
    if not res.ok:
        return {"race": None, "error": res.error}
    race = to_race(res.value, res.value.query)
    if isinstance(race, str):
        return {"race": None, "error": race, "raw_weights": res.value.dimension_weight.model_dump()}
    return {"race": race.model_dump(mode="json"), "error": None, "raw_weights": res.value.dimension_weight.model_dump()}
