"""TRL rows (GRPOTrainer hands every column to the reward functions): a conversational ``prompt`` — the App. D
agent system prompt, then the question — beside the rubricforge columns, as the export's ``trl/`` view. Read
back, ``prompt`` (a string or messages) gives the question when there is no ``question`` column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rubricforge.agent_prompt import agent_messages, prompt_hash
from rubricforge.export.convert import rubricforge as rf
from rubricforge.export.convert._rows import user_text

NAME = "trl"
DESCRIPTION = "TRL rows: conversational prompt (agent system prompt + question) + the rubricforge columns"


def detect(rec: Mapping[str, Any]) -> bool:
    rubrics = rec.get("rubrics")
    return "prompt" in rec and ("question" in rec or "answer" in rec or "race_rubrics" in rec or (
        isinstance(rubrics, list) and all(isinstance(r, Mapping) and "description" in r for r in rubrics)))


def to_rubricforge(rec: Mapping[str, Any], n: int) -> dict[str, Any]:
    row = {k: v for k, v in rec.items() if k not in ("prompt", "system_prompt_hash")}
    row.setdefault("question", user_text(rec["prompt"]))
    row.setdefault("id", n)
    return rf.to_rubricforge(row, n)


def from_rubricforge(row: Mapping[str, Any], source: str = "rubricforge") -> dict[str, Any]:
    return {**row, "prompt": agent_messages(row["question"]), "system_prompt_hash": prompt_hash()}
