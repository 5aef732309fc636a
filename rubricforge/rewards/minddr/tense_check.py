"""The temporal-tense error detector (MindDR App. 8.4), both stages.

Stage 1 (:func:`~rubricforge.rewards.minddr.tense_rules.find_tense_candidates`, rules only) flags sentences that
predict something for a time point already past. Stage 2 asks the judge, with the App. 8.4 prompt,
whether an explicit forecasting institution is named within 1–2 sentences. A sentence is a tense error
if and only if it was flagged and no institution is found; when the judge fails the finding is
unscored (``error`` None) rather than guessed.

:func:`tense_penalty` makes a report's findings MindDR's hard penalty (§5.4: "≥ 1 tense error"), the ``tense``
reward of the Report-RL group: −1 with an error, 0 without, None when no error was found but a verdict is
missing. It is scored beside Eq. 12, not inside it: MindDR keeps LLM-judged problems out of its RL rewards
and counts them when it ranks samples for preference pairs (§5.4).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import date
from typing import Literal

from pydantic import BaseModel

from rubricforge.llm.structured import Str300
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.minddr.tense_rules import TenseCandidate, find_tense_candidates


class InstitutionVerdict(BaseModel):
    result: Literal["yes", "no"]
    detail: Str300 = ""


@dataclass
class TenseFinding:
    candidate: TenseCandidate
    institution: bool | None  # the judge's answer; None when it failed
    detail: str = ""

    @property
    def error(self) -> bool | None:
        return None if self.institution is None else not self.institution


async def detect_tense_errors(judge: Judge, text: str, today: date | None = None) -> list[TenseFinding]:
    """Every stage-1 candidate of ``text`` with the stage-2 verdict; errors are those with ``error`` True."""
    candidates = find_tense_candidates(text, today or date.today())
    verdicts = await asyncio.gather(*(judge.ask("tense_verify", InstitutionVerdict, stage="tense",
                                                context=c.context, matched_text=c.matched_text) for c in candidates))
    return [TenseFinding(c, None if v is None else v.result == "yes", "" if v is None else v.detail)
            for c, v in zip(candidates, verdicts, strict=True)]


def tense_penalty(findings: list[TenseFinding]) -> float | None:
    """−1.0 when a finding is an error, 0.0 when none is, None when none is but a verdict is missing."""
    if any(f.error for f in findings):
        return -1.0
    return None if any(f.error is None for f in findings) else 0.0
