"""The format reward (DeepRubric Eq. 7): R_format = 0.5·I_answer + 0.2·I_cite + 0.1·I_tool + 0.2·I_think.

Each indicator is 0 or 1, so R_format lies in [0, 1]. On a parsed :class:`Trajectory`:

* I_answer — a properly formed answer: a closed ``<answer>…</answer>`` block (outside any thought)
  whose text is not blank (:attr:`Trajectory.answer`; an unclosed answer does not count).
* I_cite — inline citations: the answer holds at least one well-formed ``<cite id="…">…</cite>`` with
  a non-empty id (cites in thoughts or tool output do not count; whether ids resolve does not matter).
* I_tool — at least one valid tool call (:attr:`ToolCall.valid`: JSON, known tool, required argument).
* I_think — at least one closed ``<think>…</think>`` block with non-blank text.

A no-tool rollout (HOTE's no-tool mode: one think, then the answer) has no I_cite or I_tool; its R_format is
(0.5·I_answer + 0.2·I_think) / 0.7, in [0, 1] like the full reward.
"""

from __future__ import annotations

from dataclasses import dataclass

from rubricforge.rewards.claims import cited_ids
from rubricforge.rewards.trajectory import Trajectory

FORMAT_WEIGHTS = {"answer": 0.5, "cite": 0.2, "tool": 0.1, "think": 0.2}


@dataclass(frozen=True)
class FormatScore:
    components: dict[str, float]  # indicator name -> 0.0 or 1.0
    total: float  # in [0, 1]


def format_reward(traj: Trajectory, no_tool: bool = False) -> FormatScore:
    answer = traj.answer if traj.answer is not None and traj.answer.strip() else None
    components = {
        "answer": float(answer is not None),
        "cite": float(answer is not None and bool(cited_ids(answer))),
        "tool": float(any(c.valid for c in traj.tool_calls)),
        "think": float(any(t.strip() for t in traj.thinks)),
    }
    total = sum(FORMAT_WEIGHTS[k] * v for k, v in components.items())
    if no_tool:
        components = {k: components[k] for k in ("answer", "think")}
        total = sum(FORMAT_WEIGHTS[k] * v for k, v in components.items()) / (FORMAT_WEIGHTS["answer"] + FORMAT_WEIGHTS["think"])
    return FormatScore(components, total)
