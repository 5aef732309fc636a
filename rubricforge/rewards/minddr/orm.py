"""The outcome reward (MindDR §5.2 ORM): binary judgments with rationale, aggregated by majority vote.

With several judges (MindDR: "3 independent models") each casts one vote; with one judge, ``votes``
independent samples are drawn (the role's seed + 0, 1, 2, …, each a separate cached request). A vote
whose call failed is not cast. R_ORM ∈ {0, 1} is the label that more than half of *all* requested
votes agree on; with no such majority (e.g. one valid vote of three, or 1–1) the outcome is unscored
(None), never 0.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from rubricforge.llm.structured import Str300
from rubricforge.rewards.judging import Judge


class OrmVote(BaseModel):
    rationale: Str300
    correct: Literal[0, 1]


@dataclass
class OrmScore:
    value: float | None  # 1.0, 0.0 or None (no majority)
    votes: list[int | None] = field(default_factory=list)
    rationales: list[str] = field(default_factory=list)


def majority(votes: list[int | None]) -> float | None:
    """The label more than half of ``votes`` (including failed ones, None) agree on; else None."""
    for label in (0, 1):
        if sum(v == label for v in votes) * 2 > len(votes):
            return float(label)
    return None


async def orm_reward(judges: list[Judge], question: str, answer: str | None, truth: str,
                     aliases: list[str] | tuple[str, ...] = (), votes: int = 3) -> OrmScore:
    if answer is None or not answer.strip():
        return OrmScore(0.0)  # no final answer is a wrong answer; no judge is asked
    ground = truth + (f" (also accepted: {'; '.join(aliases)})" if aliases else "")
    if len(judges) > 1:
        asks = [j.ask("orm_judge", OrmVote, stage="orm", question=question, ground_truth=ground, answer=answer)
                for j in judges]
    else:
        base = judges[0].client.cfg.role(judges[0].role).seed or 0
        asks = [judges[0].ask("orm_judge", OrmVote, stage="orm", seed=base + i, question=question,
                              ground_truth=ground, answer=answer) for i in range(votes)]
    got = await asyncio.gather(*asks)
    cast: list[int | None] = [None if g is None else g.correct for g in got]
    return OrmScore(majority(cast), cast, [g.rationale for g in got if g is not None])
