"""The rubric generator's hybrid reward (Prefs Eq. 1, §3.3; docs/methods.md Q-5, Q-6).

R_total = λ_pref R_pref + λ_llm R_llm + R_fmt for one generated rubric y of a query with a preference pair:

* R_fmt (§3.3) — −1 when y fails the hard format checks
  (:func:`~rubricforge.rubric_gen.pref_rubrics.parse_rubric_items`), else 0;
* R_pref (Eq. 3) — +1 when S(r_acc|y) > S(r_rej|y), else −1 (:mod:`rubricforge.rewards.prefs.pref_score`);
* R_llm (App. C.3) — the judge's ``reward: <0.00–4.00>`` for the rubric itself, raw (not rescaled).

An unreadable rubric cannot be scored: R_pref := −1 and R_llm := 0 without any judge call, so with
λ = 1 R_total = −2, below every valid rubric (the paper gives only the −1 penalty; docs/methods.md Q-6).
A judge failure on a valid rubric leaves R_total unscored (None), never 0.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from rubricforge.llm.structured import TextAnswer
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.prefs.pref_score import labelled_number, preference_reward, pref_score
from rubricforge.rubric_gen.pref_rubrics import parse_rubric_items, pref_criteria

_REWARD = re.compile(r"reward\s*\**\s*[:：]?\s*\**\s*([0-9]+(?:\.[0-9]+)?)", re.I)


class RubricQuality(TextAnswer):
    """C.3's answer; only ``reward`` is used (confidence and reason are informative)."""

    FORMAT = "reward: <decimal between 0.00 and 4.00>\nconfidence: <integer percentage>\nreason: <brief explanation>"
    reward: float

    @classmethod
    def from_text(cls, text: str) -> RubricQuality:
        return cls(reward=labelled_number(_REWARD.search(text), "reward", 0, 4))


async def llm_rubric_reward(judge: Judge, query: str, rubric: str) -> float | None:
    """R_llm (App. C.3): the judge's 0–4 quality score of ``rubric`` for ``query``; None when unscored."""
    got = await judge.ask("rubric_quality", RubricQuality, stage="rubric_quality", question=query, response=rubric)
    return None if got is None else got.reward


@dataclass
class HybridReward:
    total: float | None
    pref: int | None
    llm: float | None
    fmt: int
    s_chosen: float | None = None
    s_rejected: float | None = None


async def hybrid_reward(judge: Judge, query: str, rubric: str, chosen: str, rejected: str,
                        lambda_pref: float = 1.0, lambda_llm: float = 1.0) -> HybridReward:
    """Eq. 1 for one generated ``rubric`` (the generator's text) and one (chosen, rejected) pair of ``query``."""
    try:
        items, _ = parse_rubric_items(rubric)
    except ValueError:
        return HybridReward(total=-lambda_pref - 1, pref=-1, llm=0.0, fmt=-1)
    criteria = pref_criteria(items)
    s_chosen, s_rejected, llm = await asyncio.gather(
        pref_score(judge, query, chosen, criteria), pref_score(judge, query, rejected, criteria),
        llm_rubric_reward(judge, query, rubric))
    pref = preference_reward(s_chosen.value, s_rejected.value)
    total = None if pref is None or llm is None else lambda_pref * pref + lambda_llm * llm
    return HybridReward(total, pref, llm, 0, s_chosen.value, s_rejected.value)
