"""One declarative mapping for the formats that are a question and a list of criteria (HealthBench, ResearchQA,
RaR, RubricHub, ResearchRubrics, verl-rubric): which field holds the question, where the list sits (a dotted
path), and which keys of a list item hold a criterion's text, weight, title and tags. A format module declares
one :class:`Layout` and exposes its ``detect``, ``to_rubricforge`` and ``from_rubricforge``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rubricforge.export.convert._rows import criterion, rf_row, user_text


def _get(rec: Mapping[str, Any], path: str) -> Any:
    value: Any = rec
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _put(out: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        out = out.setdefault(key, {})
    out[last] = value


@dataclass(frozen=True)
class Layout:
    """Where a list-of-criteria format keeps each part of a rubricforge row."""

    name: str  # the format's name (for reasons: "no rubrics (<name> rows are rubric tasks)")
    question: str  # the question's field
    rubrics: str  # dotted path of the criteria list
    text: str  # a criterion's text key
    weight: str | None = None  # its weight key; None: every criterion weighs 1 (and only such rows are written)
    title: str | None = None  # its key read as the criterion's title
    tags: str | None = None  # its key of a list of tags (kept in the criterion's ``tags``)
    id: str | None = "id"  # the id's field; None: the format has none (read: "id" if there, else the row number)
    source: str | None = None  # the field the dataset name (``--source``) is written to, if the format has one
    chat: bool = False  # the question is chat messages with one user turn (else a string)
    columns: Mapping[str, str] = field(default_factory=dict)  # format field -> rubricforge optional column
    constants: Mapping[str, Any] = field(default_factory=dict)  # fields written as they are

    def detect(self, rec: Mapping[str, Any]) -> bool:
        items, question = _get(rec, self.rubrics), rec.get(self.question)
        return (isinstance(question, list) if self.chat else isinstance(question, str)) and isinstance(items, list) \
            and bool(items) and all(isinstance(r, Mapping) and self.text in r for r in items)

    def to_rubricforge(self, rec: Mapping[str, Any], n: int) -> dict[str, Any]:
        items = _get(rec, self.rubrics)
        if not isinstance(items, list):
            raise ValueError(f"'{self.rubrics}' is not a list")
        rubrics = [criterion(i, r.get(self.text), r.get(self.weight) if self.weight else 1.0,
                             r.get(self.title) if self.title else "",
                             tags=(r.get(self.tags) or ()) if self.tags else ())
                   if isinstance(r, Mapping) else criterion(i, None, None) for i, r in enumerate(items)]
        question = user_text(rec[self.question]) if self.chat else rec.get(self.question)
        extra = {col: rec.get(f) or None for f, col in self.columns.items()}
        return rf_row(rec.get(self.id or "id", n), question, rubrics, **extra)

    def from_rubricforge(self, row: Mapping[str, Any], source: str = "rubricforge") -> dict[str, Any]:
        if not row.get("rubrics"):
            raise ValueError(f"no rubrics ({self.name} rows are rubric tasks)")
        if self.weight is None and any(float(r["weight"]) != 1.0 for r in row["rubrics"]):
            raise ValueError(f"weighted rubrics ({self.name}'s criteria carry no weight)")
        out: dict[str, Any] = copy.deepcopy(dict(self.constants))
        if self.source:
            out[self.source] = source
        if self.id:
            out[self.id] = row["id"]
        out[self.question] = [{"role": "user", "content": row["question"]}] if self.chat else row["question"]
        for f, col in self.columns.items():
            out[f] = row.get(col) or ""
        items = []
        for r in row["rubrics"]:
            item: dict[str, Any] = {self.text: r["description"]}
            if self.weight:
                item[self.weight] = r["weight"]
            if self.title:
                item[self.title] = r.get("title") or ""
            if self.tags:
                item[self.tags] = list(r.get("tags") or [])
            items.append(item)
        _put(out, self.rubrics, items)
        return out
