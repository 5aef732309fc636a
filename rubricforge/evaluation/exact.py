"""Exact-answer scores for short-answer (KG) tasks: normalised exact match and token F1 (the SQuAD
definitions MindDR and BrowseComp report), each the best over the answer and its aliases.

Normalisation: lower case, apostrophes dropped, every other run of punctuation, symbols or underscores a
space (:func:`~rubricforge.corpora.leakage.normalised_words`), then the articles a / an / the removed.
Token F1 counts shared tokens with multiplicity; an empty prediction or gold scores 0 (both empty: 1).

:func:`equivalence` is the LLM answer-equivalence judge (the grading of BrowseComp, whose accuracy MindDR
reports; MindDR §5.2's ORM is the same binary judgment): from the whole response the judge extracts the one
final answer it commits to and says whether it is equivalent to the gold answer (or an alias) — 1 or 0; a
failed judge call is unscored (None); an empty response is 0 without a call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel

from rubricforge.corpora.leakage import normalised_words
from rubricforge.llm.structured import Str200, Str400
from rubricforge.rewards.judging import Judge

ARTICLES = frozenset({"a", "an", "the"})


def tokens(text: str) -> list[str]:
    return [w for w in normalised_words(text) if w not in ARTICLES]


def exact_match(prediction: str, gold: str) -> float:
    return float(tokens(prediction) == tokens(gold))


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = tokens(prediction), tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    shared = sum((Counter(pred) & Counter(ref)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(pred), shared / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_scores(prediction: str, golds: Iterable[str]) -> dict[str, float]:
    """``{"em", "f1"}``: the best of each over ``golds`` (the answer and its aliases)."""
    golds = [g for g in golds if g and g.strip()]
    return {"em": max((exact_match(prediction, g) for g in golds), default=0.0),
            "f1": max((token_f1(prediction, g) for g in golds), default=0.0)}


class Equivalence(BaseModel):
    final_answer: Str200
    reasoning: Str400
    equivalent: Literal["yes", "no"]


async def equivalence(judge: Judge, question: str, response: str, answer: str, aliases: Iterable[str] = ()
                      ) -> dict[str, Any]:
    """``{"metrics": {"equivalence": 1.0 | 0.0 | None}, "final_answer", "reasoning"}`` (see the module docstring)."""
    if not response.strip():
        return {"metrics": {"equivalence": 0.0}, "final_answer": "", "reasoning": "empty response"}
    others = [a for a in aliases if a and a.strip() and a != answer]
    gold = answer + (f" (also accepted: {'; '.join(others)})" if others else "")
    got = await judge.ask("answer_equivalence", Equivalence, stage="equivalence", question=question, gold=gold,
                          response=response)
    if got is None:
        return {"metrics": {"equivalence": None}, "final_answer": None, "reasoning": None}
    return {"metrics": {"equivalence": float(got.equivalent == "yes")}, "final_answer": got.final_answer,
            "reasoning": got.reasoning}
