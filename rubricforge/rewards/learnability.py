"""Learnability of a rubric task: the generator answers the question closed-book (no tools) and the answer is
scored with the example's own rubric (the rubric reward, DeepRubric Eq. 4). A task whose closed-book score is
already at or above ``quality.too_easy_threshold`` teaches a search agent little — the model knows it without
searching — so it is flagged too easy (and dropped when ``quality.drop_too_easy``). None of the peers measures
this; the build's gate stage (:mod:`rubricforge.jobs.gates`) runs it and the card shows the score
distribution.

A failed generation or an unscored judge leaves the example unscored (None): it is never flagged on a guess.
Every call goes through the LLM cache, so gating the same examples again asks nothing again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubricforge.llm.structured import TextAnswer
from rubricforge.rewards.judging import PROMPTS, Judge
from rubricforge.rewards.deeprubric.rubric_reward import criteria_from, rubric_reward

if TYPE_CHECKING:
    from rubricforge.config import Config
    from rubricforge.llm import LLMClient

BINS = 10  # the card's histogram: [0, 0.1), ..., [0.9, 1.0]


class ClosedBookAnswer(TextAnswer):
    FORMAT = "a plain-text answer"
    text: str

    @classmethod
    def from_text(cls, text: str) -> ClosedBookAnswer:
        if not text.strip():
            raise ValueError("an empty answer")
        return cls(text=text.strip())


@dataclass
class Learnability:
    scores: dict[str, float | None]  # example id -> closed-book rubric score (None: unscored)
    too_easy: list[str]  # ids at or above the threshold

    def summary(self, threshold: float, dropped: bool) -> dict[str, Any]:
        scored = [s for s in self.scores.values() if s is not None]
        hist = [0] * BINS
        for s in scored:
            hist[min(int(s * BINS), BINS - 1)] += 1
        return {"threshold": threshold, "drop": dropped, "checked": len(self.scores), "scored": len(scored),
                "unscored": len(self.scores) - len(scored), "too_easy": len(self.too_easy),
                "mean": sum(scored) / len(scored) if scored else None,
                "histogram": {f"{i / BINS:.1f}-{(i + 1) / BINS:.1f}": n for i, n in enumerate(hist)}}


async def closed_book_score(client: LLMClient, judge: Judge, question: str, rubrics: Sequence[Any],
                            cfg: Config) -> float | None:
    got = await client.generate("generator", PROMPTS.messages("closed_book_answer", question=question),
                                output=ClosedBookAnswer, stage="closed_book_answer")
    if not got.ok:
        return None
    score = await rubric_reward(judge, question, got.value.text, criteria_from(rubrics), cfg.reward.judge_mode)
    return score.value


async def learnability(items: Sequence[tuple[str, str, Sequence[Any]]], cfg: Config, client: LLMClient) -> Learnability:
    """Closed-book scores of ``(id, question, rubrics)`` items with the job's ``client`` (its generator and judge
    roles; the calls are in its ledger)."""
    judge = Judge(client, "judge")
    got = await asyncio.gather(*(closed_book_score(client, judge, q, r, cfg) for _, q, r in items))
    scores = {id_: s for (id_, _, _), s in zip(items, got, strict=True)}
    threshold = cfg.quality.too_easy_threshold
    return Learnability(scores, [i for i, s in scores.items() if s is not None and s >= threshold])
