"""DeepResearch Bench II's scorer (Li et al. 2026; github.com/imlrz/DeepResearch-Bench-II): binary rubric items
judged against a report, as its ``run_evaluation.py`` asks and its ``aggregate_scores.py`` counts.

**Task** (a row of its ``tasks_and_rubrics.jsonl``, read as it is): ``content`` = ``{"task", "rubric":
{"info_recall": [item, ...], "analysis": [...], "presentation": [...]}, "blocked": {"title", "authors",
"urls"}}`` (a mapping or its JSON text); the blocked work is the expert article the rubric came from.

**Judging**: the items in that dimension order, in calls of ``per_call`` items (its ``CHUNK_SIZE``, 50), each call
the benchmark's prompt (``rewards/prompts/drb2_rubrics.user.md``) with the report's first 150,000 characters (its
``MAX_PAPER_CHARS``) and the JSON of task, items and blocked work; every item gets 1 (satisfied, supported by no
blocked reference), 0 (not mentioned) or −1 (mentioned, resting on a blocked reference). An answer that does not
return every item of its call, named exactly, is resampled (its ``validate_batch_result``); a call that never
does leaves the task unscored (None), as the benchmark gives the whole task an error.

**Per task** (``compute_dimension_averages``): ``drb2.<dimension>`` = the share of the dimension's items scored 1;
``drb2`` = items scored 1 / all items; ``drb2.blocked`` = items scored −1 / all items (its ``blocked_rate``). A −1
counts as not satisfied, never as −1 in a sum. A dimension without items has no metric. **Per run** the mean over
tasks (its per-model average), which the summary's mean is. An empty report scores 0 without a judge call.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from rubricforge.errors import UserError
from rubricforge.rewards.judging import Judge

DIMENSIONS = ("info_recall", "analysis", "presentation")
MAX_PAPER_CHARS = 150_000


class ItemVerdict(BaseModel):
    rubric_item: str
    score: Literal[1, 0, -1]
    reason: str = ""
    evidence: str = ""


class Judgement(BaseModel):
    results: list[ItemVerdict]


def parse_content(raw: Any, where: str) -> tuple[str, dict[str, list[str]], Any]:
    """(task, items per dimension, blocked work) of a ``content`` column; a UserError naming ``where``."""
    try:
        content = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        content = None
    rubric = content.get("rubric") if isinstance(content, Mapping) else None
    if not isinstance(rubric, Mapping) or not all(
            isinstance(rubric.get(d, []), list) and all(isinstance(i, str) for i in rubric.get(d, []))
            for d in DIMENSIONS) or not any(rubric.get(d) for d in DIMENSIONS):
        raise UserError(f"{where}: 'content' is not a DeepResearch Bench II rubric",
                        'give {"task", "rubric": {"info_recall": [...], "analysis": [...], "presentation": [...]}, '
                        '"blocked"} as its tasks_and_rubrics.jsonl does')
    assert isinstance(content, Mapping)
    return str(content.get("task", "")), {d: list(rubric.get(d, [])) for d in DIMENSIONS}, content.get("blocked", {})


def _lacking(judgement: Judgement, batch: Sequence[str]) -> str | None:
    returned = [v.rubric_item for v in judgement.results]
    missing = [item for item in batch if item not in returned]
    if not missing and len(returned) == len(batch):
        return None
    return (f"the answer has {len(returned)} results for {len(batch)} rubric items"
            + (f" (missing: {missing[0][:80]!r})" if missing else "")
            + "; return one result per rubric item, its rubric_item text exactly as given")


def task_scores(verdicts: Mapping[str, int], rubric: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """DeepResearch Bench II's per-task numbers from each item's 1 / 0 / −1 (see the module docstring)."""
    out: dict[str, float] = {}
    ones = blocked = total = 0
    for d in DIMENSIONS:
        scores = [verdicts[i] for i in dict.fromkeys(rubric.get(d, []))]  # an item text once, as its dict keeps it
        if scores:
            out[f"drb2.{d}"] = sum(s == 1 for s in scores) / len(scores)
        ones, blocked, total = ones + sum(s == 1 for s in scores), blocked + sum(s == -1 for s in scores), total + len(scores)
    return {"drb2": ones / total, **out, "drb2.blocked": blocked / total}


async def drb2(judge: Judge, task: Mapping[str, Any], report: str, per_call: int) -> dict[str, Any]:
    """The ``drb2`` scorer's result for ``report`` on ``task`` (see the module docstring)."""
    question, rubric, blocked = parse_content(task.get("content"), f"task {task.get('id')!r}")
    items = list(dict.fromkeys(i for d in DIMENSIONS for i in rubric[d]))
    if not report:
        return {"metrics": task_scores(dict.fromkeys(items, 0), rubric), "verdicts": dict.fromkeys(items, 0)}
    batches = [items[i:i + per_call] for i in range(0, len(items), per_call)]
    paper = report[:MAX_PAPER_CHARS]
    got = await asyncio.gather(*(judge.ask(
        "drb2_rubrics", Judgement, stage="drb2", paper=paper,
        rubric=json.dumps({"task": question, "rubric_items": batch, "blocked": blocked}, ensure_ascii=False, indent=2),
        check=functools.partial(_lacking, batch=batch)) for batch in batches))
    if any(j is None for j in got):
        names = ["drb2", *(f"drb2.{d}" for d in DIMENSIONS if rubric[d]), "drb2.blocked"]
        return {"metrics": dict.fromkeys(names), "verdicts": {}}
    verdicts = {v.rubric_item: v.score for j in got if j is not None for v in j.results}
    return {"metrics": task_scores(verdicts, rubric), "verdicts": verdicts}
