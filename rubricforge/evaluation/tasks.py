"""What an evaluation reads: a task set and the reports written for it.

**Tasks**: any dataset ``rubricforge reward score`` reads — a rubricforge export (tree rows with ``question`` +
``rubrics``, KG rows with ``question`` + ``answer`` (+ ``answer_aliases``), Report-RL rows with ``race_rubrics``
and ``reference_report``), or a file of another format that :mod:`rubricforge.export.convert` converts, such as
DeepResearch Bench's ``criteria.jsonl`` (its rows get ``race_rubrics``). A task's id is its row's ``id``, as text.

**Reports**: JSONL, one a line: DeepResearch Bench's ``{"id", "prompt", "article"}`` or rubricforge's
``{"id", "response"}`` (a string or chat messages, as ``reward score`` reads). A report in the agent's tag
protocol is its ``<answer>`` (an unclosed one counts; none: the empty report); a report without any known tag
is the text itself. A line that is not a JSON object, has no text, names no task, repeats an id, or holds a
report over :data:`MAX_REPORT_CHARS` characters (no judge reads it whole) is skipped, counted and written to the
rejects file; a line of a task that ``--split`` / ``--limit`` left out is passed over without a word.

**Scorers** per task (:func:`scorers_for`): ``exact`` for a row with an ``answer``, else ``race`` for a row
with a RACE rubric, else ``rubric``; or the scorers asked for, each checked against the row's columns
(``citation`` and ``format`` read only the report).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.evaluation.drb2 import parse_content
from rubricforge.export.convert import to_rubricforge_rows
from rubricforge.plugins import added
from rubricforge.io.datasets import load_examples
from rubricforge.rewards.trajectory import parse_trajectory

SCORERS = ("race", "rubric", "exact", "equivalence", "citation", "format", "healthbench", "coverage", "drb2")
# the column a scorer reads, if one
NEEDS = {"race": "race_rubrics", "rubric": "rubrics", "exact": "answer", "equivalence": "answer", "healthbench": "rubrics",
         "coverage": "rubrics", "drb2": "content"}
REPORT_FIELDS = ("article", "response")  # DRB's, then rubricforge's
# the longest report (or reference) sent to a judge: about 100,000 tokens, what a 128K-context judge can read with
# its prompt and rubric; a longer one is refused (a rejects line), never sent whole nor cut
MAX_REPORT_CHARS = 400_000


def load_tasks(path: str | Path, split: str | None = None, limit: int | None = None,
               outside: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """The task rows by id (see the module docstring); ``split``: only rows whose ``split`` column is it;
    ``limit``: the first ``limit`` of them; ``outside`` gets the ids of the rows they left out."""
    tasks = everything = load_examples(path, adapt=to_rubricforge_rows)
    if not tasks:
        raise UserError(f"task set {path} is empty", "pass a dataset with at least one row")
    if split is not None:
        splits = sorted({str(t["split"]) for t in tasks.values() if t.get("split") is not None})
        tasks = {tid: t for tid, t in tasks.items() if t.get("split") == split}
        if not tasks:
            raise UserError(f"task set {path} has no row of split '{split}'",
                            f"choose one of its splits ({', '.join(splits) or 'it has no split column'})")
    chosen = dict(list(tasks.items())[:limit])
    if outside is not None:
        outside.update(tid for tid in everything if tid not in chosen)
    return chosen


def scorers_for(task: Mapping[str, Any], asked: Sequence[str] | None) -> tuple[str, ...]:
    """The scorers of one task: ``asked`` (each needs its column) or the automatic choice."""
    tid = task.get("id")
    if not asked:
        for name in ("exact", "race", "rubric"):
            if task.get(NEEDS[name]) not in (None, "", []):
                return (name,)
        raise UserError(f"task {tid!r} has no answer, race_rubrics nor rubrics column: nothing to score it by",
                        "pass a rubricforge dataset, DRB's criteria.jsonl, or a format `rubricforge convert` reads")
    known = (*SCORERS, *added("scorers", SCORERS))  # with the plugins' (rubricforge.plugins)
    for name in asked:
        if name not in known:
            raise UserError(f"unknown scorer '{name}'", f"use --scorers with some of: {', '.join(known)}")
        if name in NEEDS and task.get(NEEDS[name]) in (None, "", []):
            raise UserError(f"task {tid!r} has no '{NEEDS[name]}' column (the '{name}' scorer reads it)",
                            "choose scorers the task set supports (--scorers), or leave --scorers out")
        if name == "drb2":  # a malformed rubric is bad input before any judge call, not a failure mid-run
            parse_content(task["content"], f"task {tid!r}")
    return tuple(asked)


def report_text(completion: str | list[dict[str, Any]]) -> str:
    """The report an agent's output stands for (see the module docstring)."""
    traj = parse_trajectory(completion)
    if traj.protocol is None:
        if isinstance(completion, str):
            return completion.strip()
        return traj.steps[-1].text.strip() if traj.steps else ""
    return (traj.answer if traj.answer is not None else traj.partial_answer or "").strip()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def load_reports(path: str | Path, tasks: Mapping[str, Any], rejects: Rejects,
                 outside: Collection[str] = ()) -> dict[str, str]:
    """Report text by task id; bad lines go to ``rejects``, lines of the ``outside`` tasks (left out of the task
    set by a split or limit) nowhere. A UserError when the file is missing, is not UTF-8, or matches no task."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"reports file {path} not found",
                        'pass a JSONL of {"id", "article"} (DeepResearch Bench) or {"id", "response"} lines')
    out: dict[str, str] = {}
    n = 0
    try:
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                why, tid, text = _report(line, tasks, out)
                if why and tid in outside:
                    continue
                if why:
                    rejects.add(path, n, why, line.strip())
                else:
                    out[tid] = text
    except UnicodeDecodeError:
        raise UserError(f"reports file {path} is not UTF-8 text (near line {n + 1})", "save it as UTF-8") from None
    if not out:
        raise UserError(f"reports file {path}: no line is a report of a task of the task set "
                        f"({rejects.total} skipped)", "check that its ids are the task set's ids")
    return out


def _report(line: str, tasks: Mapping[str, Any], seen: Mapping[str, str]) -> tuple[str, str, str]:
    """(why the line is rejected or "", task id, report text)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return "not valid JSON", "", ""
    if not isinstance(record, dict):
        return "not a JSON object", "", ""
    tid = str(record.get("id", ""))
    field = next((f for f in REPORT_FIELDS if f in record), None)
    if field is None:
        return "no 'article' or 'response' field", tid, ""
    value = record[field]
    if not isinstance(value, (str, list)) or (isinstance(value, list) and not all(isinstance(m, dict) for m in value)):
        return f"'{field}' is not a string or a list of chat messages", tid, ""
    if tid not in tasks:
        return f"id {tid!r} is not in the task set", tid, ""
    if tid in seen:
        return f"a second report for id {tid!r}", tid, ""
    text = report_text(value)
    if len(text) > MAX_REPORT_CHARS:
        return f"a report over {MAX_REPORT_CHARS:,} characters (no judge reads it whole)", tid, ""
    return "", tid, text
