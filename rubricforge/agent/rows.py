"""The agent's training rows (for training, rollouts, DPO pairs): a rubricforge dataset's rows, checked for the
columns each reward needs, with the agent's prompt. (An evaluation's rows are its task set,
:mod:`rubricforge.evaluation.tasks`.)

Any layout ``rubricforge reward score`` reads works (an export folder, a run directory, ``trl/``,
``data.parquet``, a ``.jsonl``). A row keeps every column (TRL hands them to the reward functions and to
the tool environment's ``reset``); its ``prompt`` is the row's own conversational prompt when it has one
(the TRL view), else the App. D system prompt followed by the question.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubricforge.agent.prompt import agent_prompt
from rubricforge.errors import UserError
from rubricforge.io.datasets import load_examples
from rubricforge.rewards.scorer import check_columns


def training_rows(dataset: str | Path, rewards: Iterable[str]) -> list[dict[str, Any]]:
    rewards = list(rewards)
    rows = list(load_examples(dataset).values())
    if not rows:
        raise UserError(f"dataset {dataset} has no examples", "build one with `rubricforge build`")
    check_columns(rows, rewards, dataset, prompt_column="question",
                  fix="train on a rubricforge export (`rubricforge build` writes dataset/), or choose a reward "
                      "that does not need it (train.reward)")
    return [{**row, "prompt": row.get("prompt") or agent_prompt(str(row["question"]))} for row in rows]
