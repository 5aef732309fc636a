"""Quality filters (MindDR §4.1), in order; the first one that fires drops the question with its reason.

* ``direct_answer`` — the judge answers closed-book; a matching answer drops the question.
* ``single_retrieval`` — one search call with the question (``tools.top_k`` results), the judge
  answers from those results only; a matching answer drops it. Whether the answer's own passage was
  among the results is kept for the difficulty label.
* ``plausibility`` — the judge is given the hop facts (relation and evidence sentence of each hop) and asked
  whether the answer can be derived from them as the question describes them, and whether it is the only
  answer they allow (MindDR's condition and reasoning plausibility); either "no" drops the question. Its
  verdict is counted by :func:`judge_verdict`.

A judge call that fails (an answer that is no valid JSON) is recorded and drops the question as unscored (never a
silent pass); one the provider never answered leaves the subgraph unfinished (:mod:`.run`).
Answers match when one normalised form contains the other (the answer's aliases included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rubricforge.llm.structured import Str80, Str200
from rubricforge.pipelines.kg.graph import canonical_key
from rubricforge.pipelines.kg.questions import facts
from rubricforge.pipelines.prompting import render
from rubricforge.schema import KGPath

if TYPE_CHECKING:
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.llm import LLMClient

RESULT_CHARS = 300  # per search result shown to the judge
MIN_MATCH_CHARS = 3


class Answer(BaseModel):
    answer: Str80


class Derivation(BaseModel):
    derivable: bool
    unique: bool
    reason: Str200


def answers_match(predicted: str, aliases: list[str]) -> bool:
    """Equal canonical forms, or one containing the other when both have at least MIN_MATCH_CHARS."""
    got = canonical_key(predicted)
    for alias in aliases:
        want = canonical_key(alias)
        if got and got == want:
            return True
        if min(len(got), len(want)) >= MIN_MATCH_CHARS and (want in got or got in want):
            return True
    return False


async def _judge(client: LLMClient, prompt: str, output: type[BaseModel], stage: str, max_tokens: int) -> Any:
    return await client.generate("judge", [{"role": "user", "content": prompt}], output=output, stage=stage,
                                 max_tokens=max_tokens)


async def run_filters(question: str, path: KGPath, aliases: list[str], answer_passages: list[str],
                      client: LLMClient, tools: ToolBox, filters: list[str], max_tokens: int) -> dict[str, Any]:
    """The log record: one entry per filter that ran (``results``), ``drop`` (reason or None) and
    ``answer_passage_retrieved`` (None when the single-retrieval test did not run)."""
    record: dict[str, Any] = {"results": {}, "drop": None, "answer_passage_retrieved": None}
    for name in filters:
        if name == "direct_answer":
            res = await _judge(client, render("kg_closed_book", question=question), Answer, "kg_direct_answer",
                               max_tokens)
            result = {"answer": res.value.answer if res.ok else None, "error": res.error}
            drop = res.ok and answers_match(res.value.answer, aliases) and "answered closed-book by the judge"
        elif name == "single_retrieval":
            snippets = await tools.asearch_snippets(question)
            record["answer_passage_retrieved"] = any(s.passage_id in answer_passages for s in snippets)
            results = "\n".join(f"[{i}] {s.title}: {s.text[:RESULT_CHARS]}" for i, s in enumerate(snippets, 1))
            res = await _judge(client, render("kg_single_search", question=question, results=results or "(none)"),
                               Answer, "kg_single_retrieval", max_tokens)
            result = {"answer": res.value.answer if res.ok else None, "error": res.error,
                      "passage_ids": [s.passage_id for s in snippets]}
            drop = res.ok and answers_match(res.value.answer, aliases) and "answered from one search call"
        else:
            res = await _judge(client, render("kg_plausibility", question=question, answer=path.names[path.answer],
                                              facts=facts(path)), Derivation, "kg_plausibility", max_tokens)
            result = {**(res.value.model_dump() if res.ok else {}), "error": res.error}
            drop = res.ok and ((not res.value.derivable and f"not derivable from the hop facts: {res.value.reason}")
                               or (not res.value.unique and f"answer not unique: {res.value.reason}"))
        record["results"][name] = result
        if not res.ok:
            record["drop"] = f"{name} unscored: the judge failed ({res.error})"
        elif drop:
            record["drop"] = drop
        if record["drop"]:
            break
    return record


def judge_verdict(record: dict[str, Any] | None) -> str | None:
    """The derivation judge's verdict in a filter record: ``"derivable, unique"``, ``"not derivable"``, ``"not
    unique"`` or ``"unscored"`` (None when it did not run)."""
    res = (record or {}).get("plausibility")
    if res is None:
        return None
    if res.get("error") or "derivable" not in res:
        return "unscored"
    return "not derivable" if not res["derivable"] else "not unique" if not res["unique"] else "derivable, unique"


def drop_category(reason: str) -> str:
    """The reason's category for the card's drop-rate table (the text before the first colon / paren)."""
    return reason.split(":")[0].split(" (")[0].strip()
