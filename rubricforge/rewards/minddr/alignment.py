"""MindDR §5.4's quality score s(x, y) for preference pairs: "(1) LLM-as-Judge, where multiple independent evaluators
assess fine-grained dimensions including comprehensiveness, logical consistency, language quality, and tense
accuracy; and (2) rule-based detection, applying hard penalties for detectable structural issues (missing
citations, format violations, etc.). The two signals are weighted and combined into a quality score".

Reading (the paper gives no weights or prompts): one judge call per judged dimension (:data:`DIMENSIONS`, 0–10
read as /10), tense accuracy 1 without an App. 8.4 tense error and 0 with one; the judged part J is their mean.
The hard penalties count Eq. 11's violations (answer tag, markdown, cite markup) and a missing-citation violation
when Eq. 10 gives −1 (fewer than 0.7·n_ref citations); s = J − ``penalty`` × violations, so with the default
penalty 1 a report with a structural issue ranks below every clean report. Unscored (None) when a judge call or
the tense check failed.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from rubricforge.llm.structured import Str300

DIMENSIONS: dict[str, str] = {
    "comprehensiveness": "the report covers the question's key aspects, without omitting important information",
    "logical consistency": "the claims, sections and conclusions agree with each other and follow from the evidence",
    "language quality": "the writing is clear, fluent, well organised and free of errors and repetition",
}


class DimensionScore(BaseModel):
    rationale: Str300 = ""
    score: float = Field(ge=0, le=10)


def alignment_score(judged: Sequence[float | None], tense_penalty: float | None, violations: int,
                    penalty: float = 1.0) -> float | None:
    """s(x, y) = mean(judged scores / 10 and tense accuracy) − ``penalty`` × rule violations; None when a part is
    unscored. ``tense_penalty``: the ``tense`` reward (−1 with an error, 0 without)."""
    if tense_penalty is None or any(v is None for v in judged):
        return None
    parts = [float(v) / 10 for v in judged if v is not None] + [1.0 + tense_penalty]
    return sum(parts) / len(parts) - penalty * violations
