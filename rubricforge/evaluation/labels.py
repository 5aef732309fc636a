"""Human-labelled rubric verification, for ``rubricforge judge audit``: reports, their rubric points, and whether a
person found each point covered.

The layout is THU-KEG/RuVerBench's, its four DeepResearch files (task + rubric points, responses, labels, taxonomy)
joined into one record per report, with their field names::

    {"id": "...", "question": "...", "response": "<the report>",
     "rubric": [{"point": "<rubric text>", "covered": true, "category": "facts"}, ...]}

A JSONL file (one record a line) or a JSON file holding a list of records. ``covered`` is ``true`` / ``false``,
``1`` / ``0``, ``"yes"`` / ``"no"`` or ``"success"`` / ``"fail"`` (RuVerBench's spellings); ``category`` is optional
(``uncategorised`` without one). Any mistake is a UserError naming the file, the line (or record) and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.errors import UserError, require_file

UNCATEGORISED = "uncategorised"
YES = {"true", "1", "yes", "success"}
NO = {"false", "0", "no", "fail"}
LAYOUT = ('{"id", "question", "response", "rubric": [{"point", "covered", "category"}]} per report '
          "(RuVerBench's fields)")


@dataclass(frozen=True)
class Point:
    text: str
    covered: bool
    category: str


@dataclass(frozen=True)
class LabelledReport:
    id: str
    question: str
    response: str
    points: tuple[Point, ...]


def _covered(value: Any) -> bool | None:
    said = str(value).strip().lower() if isinstance(value, (bool, int, str)) else ""
    return True if said in YES else False if said in NO else None


def _record(record: Any, where: str) -> LabelledReport:
    def bad(field: str, why: str) -> UserError:
        return UserError(f"{where}: '{field}' {why}", f"write each report as {LAYOUT}")

    if not isinstance(record, dict):
        raise UserError(f"{where} is not a JSON object", f"write each report as {LAYOUT}")
    for field in ("id", "question", "response"):
        if not isinstance(record.get(field), (str, int)) or not str(record[field]).strip():
            raise bad(field, "is missing or empty")
    rubric = record.get("rubric")
    if not isinstance(rubric, list) or not rubric:
        raise bad("rubric", "is missing or not a non-empty list of points")
    points = []
    for i, item in enumerate(rubric):
        if not isinstance(item, dict) or not isinstance(item.get("point"), str) or not item["point"].strip():
            raise bad(f"rubric[{i}].point", "is missing or empty")
        covered = _covered(item.get("covered"))
        if covered is None:
            raise bad(f"rubric[{i}].covered", f"is {item.get('covered')!r}, not true/false, 1/0, yes/no or success/fail")
        category = item.get("category")
        if category is not None and (not isinstance(category, str) or not category.strip()):
            raise bad(f"rubric[{i}].category", "is not a non-empty string")
        points.append(Point(item["point"].strip(), covered, (category or UNCATEGORISED).strip()))
    return LabelledReport(str(record["id"]), str(record["question"]), str(record["response"]), tuple(points))


def load_labels(path: str | Path) -> list[LabelledReport]:
    """The labelled reports of ``path`` (see the module docstring), in file order; ids must be unique."""
    path = require_file(path, "labels file", f"pass a JSONL of {LAYOUT}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"labels file {path} is not UTF-8 text", "save it as UTF-8") from None
    entries: list[tuple[str, Any]] = []
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno} is not valid JSON ({exc.msg})", "fix the JSON") from None
        if not isinstance(data, list):
            raise UserError(f"{path} does not hold a JSON list of reports", f"write a list of {LAYOUT}")
        entries = [(f"{path} record {n}", r) for n, r in enumerate(data, 1)]
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    entries.append((f"{path}:{n}", json.loads(line)))
                except json.JSONDecodeError:
                    raise UserError(f"{path}:{n} is not valid JSON", "fix or remove that line") from None
    reports, seen = [], set()
    for where, record in entries:
        report = _record(record, where)
        if report.id in seen:
            raise UserError(f"{where}: 'id' {report.id!r} repeats an earlier report", "give every report its own id")
        seen.add(report.id)
        reports.append(report)
    if not reports:
        raise UserError(f"labels file {path} holds no report", f"write one {LAYOUT}")
    return reports
