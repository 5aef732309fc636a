"""The rubricforge row every converter reads and writes, and small helpers shared by the format modules.

A rubricforge row (the main columns of the export, :mod:`rubricforge.export.views`) as the converters use it:
``id``, ``question``, ``rubrics`` (criterion dicts: ``id, type, description, weight, title, source_leaf_ids,
evidence, passage_ids``), and where the task has them ``answer`` + ``answer_aliases`` (short-answer tasks),
``race_rubrics`` (a RACE rubric as a JSON string), ``topic`` and ``reference_answer``. A row needs rubrics, an
answer or a RACE rubric: something a reward can score against.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

OPTIONAL = ("answer", "answer_aliases", "race_rubrics", "topic", "reference_answer")


def criterion(n: int, description: Any, weight: Any, title: Any = "", type_: str | None = None,
              evidence: Iterable[str] = (), id_: Any = None, tags: Iterable[str] = ()) -> dict[str, Any]:
    """One criterion dict; ``n`` is its 0-based position (the id is ``c<n+1>`` unless given). A criterion from
    a format without types has type None (the judge sees its title and description). ``tags`` (HealthBench's)
    are carried only when there are some; no reward reads them."""
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"rubric {n + 1} has no description")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ValueError(f"rubric {n + 1} has no numeric weight")
    if type_ not in (None, "factual", "logical"):
        raise ValueError(f"rubric {n + 1} has type {type_!r} (factual, logical or none)")
    out: dict[str, Any] = {"id": str(id_ or f"c{n + 1}"), "type": type_, "description": description.strip(),
                           "weight": float(weight), "title": str(title or ""), "source_leaf_ids": [],
                           "evidence": [str(e) for e in evidence], "passage_ids": []}
    if tags := [str(t) for t in tags]:
        out["tags"] = tags
    return out


def full_criterion(n: int, item: Any) -> dict[str, Any]:
    """A rubricforge / DeepRubric criterion dict with every field of the schema."""
    if not isinstance(item, Mapping):
        raise ValueError(f"rubric {n + 1} is not an object")
    out = criterion(n, item.get("description"), item.get("weight"), item.get("title"), item.get("type"),
                    item.get("evidence") or (), item.get("id"), item.get("tags") or ())
    out["source_leaf_ids"] = [str(x) for x in item.get("source_leaf_ids") or []]
    out["passage_ids"] = [str(x) for x in item.get("passage_ids") or []]
    return out


def rf_row(id_: Any, question: Any, rubrics: list[dict[str, Any]] | None = None, **optional: Any) -> dict[str, Any]:
    """A rubricforge row; optional columns left out when None. Raises ValueError when it has nothing to score."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("no question")
    row: dict[str, Any] = {"id": str(id_), "question": question.strip(), "rubrics": list(rubrics or [])}
    row.update({k: v for k, v in optional.items() if v is not None})
    if not (row["rubrics"] or row.get("answer") or row.get("race_rubrics")):
        raise ValueError("no rubrics, answer or RACE rubric")
    return row


def user_text(messages: Any) -> str:
    """The question of a conversation: its only user turn (a multi-turn conversation is not one question)."""
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, list):
        raise ValueError("messages are not a list")
    users = [m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    if len(users) != 1 or not isinstance(users[0], str):
        raise ValueError(f"{len(users)} user turns (a rubricforge example is one question)")
    return users[0]


def json_value(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{what} is not valid JSON") from None
    return value


def answers(row: Mapping[str, Any]) -> list[str]:
    """The answer and its aliases of a short-answer row, answer first, without duplicates."""
    out = [str(row["answer"])] + [str(a) for a in row.get("answer_aliases") or []]
    return list(dict.fromkeys(a for a in out if a.strip()))


def from_answers(values: Any) -> dict[str, Any]:
    """``answer`` / ``answer_aliases`` from a string or a list of strings."""
    values = [values] if isinstance(values, (str, int, float)) else values
    if not isinstance(values, list) or not values or not all(isinstance(v, (str, int, float)) for v in values):
        raise ValueError("the answer is not a string or a list of strings")
    values = [str(v) for v in values]
    return {"answer": values[0], "answer_aliases": values[1:]}
