"""Training rows from a rubricforge dataset: the columns each reward needs, and the agent's prompt.

Any layout ``rubricforge reward score`` reads works (an export folder, a run directory, ``trl/``,
``data.parquet``, a ``.jsonl``). A row keeps every column (TRL hands them to the reward functions and to
the tool environment's ``reset``); its ``prompt`` is the row's own conversational prompt when it has one
(the TRL view), else the App. D system prompt followed by the question.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubricforge.agent_prompt import agent_system_prompt
from rubricforge.errors import UserError
from rubricforge.rubric_gen.inputs import load_examples
from rubricforge.rubric_gen.scorer import COLUMNS

def agent_prompt(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": agent_system_prompt()}, {"role": "user", "content": question}]


def check_columns(rows: Iterable[dict[str, Any]], rewards: Iterable[str], where: str | Path) -> None:
    """A UserError naming the first missing column (``question`` is always needed: it is the prompt)."""
    needed = dict.fromkeys(["question"])
    for name in rewards:
        needed.update(dict.fromkeys(COLUMNS.get(name, ())))
    for row in rows:
        for column in needed:
            if row.get(column) in (None, "", []):
                reward = next((r for r in rewards if column in COLUMNS.get(r, ())), None)
                why = f" (the '{reward}' reward reads it)" if reward else " (the agent's prompt)"
                raise UserError(f"dataset {where}: example {row.get('id', '?')!r} has no '{column}' column{why}",
                                "train on a rubricforge export (`rubricforge build` writes dataset/), or choose a "
                                "reward that does not need it (train.reward)")


def training_rows(dataset: str | Path, rewards: Iterable[str]) -> list[dict[str, Any]]:
    rewards = list(rewards)
    rows = list(load_examples(dataset).values())
    if not rows:
        raise UserError(f"dataset {dataset} has no examples", "build one with `rubricforge build`")
    check_columns(rows, rewards, dataset)
    return [{**row, "prompt": row.get("prompt") or agent_prompt(str(row["question"]))} for row in rows]
