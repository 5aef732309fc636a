"""HealthBench-style rubrics (OpenAI's HealthBench JSONL): ``{"prompt_id", "prompt": [chat messages],
"rubrics": [{"criterion", "points", "tags"}], "example_tags"}``. Points may be negative; HealthBench's score is
Σ points met / Σ positive points, clipped to [0, 1] — rubricforge's rubric reward with the points as weights.
Only single-question conversations convert (a multi-turn conversation is rejected with the reason). A rubric's
``tags`` are kept in the criterion's ``tags`` (for the way back), not in its title: the judge sees a title, and
``level:example,axis:accuracy`` is not one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rubricforge.export.convert._rows import criterion, rf_row, user_text

NAME = "healthbench"
DESCRIPTION = "HealthBench-style rubrics: prompt_id + prompt messages + rubrics [{criterion, points, tags}]"


def detect(rec: Mapping[str, Any]) -> bool:
    rubrics = rec.get("rubrics")
    return "prompt" in rec and isinstance(rubrics, list) and all(isinstance(r, Mapping) and "criterion" in r
                                                                 for r in rubrics)


def to_rubricforge(rec: Mapping[str, Any], n: int) -> dict[str, Any]:
    rubrics = [criterion(i, r.get("criterion"), r.get("points"), tags=r.get("tags") or ()) for i, r in enumerate(rec["rubrics"])]
    return rf_row(rec.get("prompt_id", n), user_text(rec["prompt"]), rubrics)


def from_rubricforge(row: Mapping[str, Any], source: str = "rubricforge") -> dict[str, Any]:
    if not row.get("rubrics"):
        raise ValueError("no rubrics (HealthBench items are rubric tasks)")
    return {"prompt_id": row["id"], "prompt": [{"role": "user", "content": row["question"]}],
            "rubrics": [{"criterion": r["description"], "points": r["weight"],
                         "tags": list(r.get("tags") or [])} for r in row["rubrics"]],
            "example_tags": []}
