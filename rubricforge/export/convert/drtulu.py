"""DR Tulu RL rows (``rl-research/dr-tulu-rl-data``, read by its open-instruct ``grpo_fast.py`` with
``--ground_truths_key ground_truth --sft_messages_key messages``).

A row: ``messages`` (one user turn), ``ground_truth`` (a string), ``dataset`` (the verifier: open-instruct
looks up ``dataset.lower()`` among its verifiers' names and skips the reward when none matches),
``source``, ``question_type``; no ``id``.

* **Rubric rows**: ``dataset`` = ``general_rubric``, ``ground_truth`` = JSON ``{"query", "rubrics": [{"description",
  "weight", "title"}]}`` (DR Tulu's rubric buffer reads ``query`` and ``rubrics`` of every training row).
* **Short-answer rows**: ``dataset`` = ``rl_rag_exact_answer`` (DR Tulu's exact-answer verifier: it reads the
  ``<answer>`` or ``\\boxed{}`` text and compares it with each label by F1, exact match or an LLM judge), and
  ``ground_truth`` = a JSON list of the accepted answers (the verifier ``json.loads`` it; a list is every
  acceptable answer). Such rows have no rubrics, so they must not be mixed into a run with DR Tulu's rubric
  buffer (``--use_rubric_buffer``): the export puts them in their own config.

Rows read without an ``id`` get their 0-based row number as id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rubricforge.export.convert._rows import answers, criterion, from_answers, json_value, rf_row, user_text

NAME = "drtulu"
DESCRIPTION = "DR Tulu RL rows: messages + ground_truth JSON + dataset (rubric rows and short-answer rows)"
RUBRIC_VERIFIER = "general_rubric"
EXACT_VERIFIER = "rl_rag_exact_answer"
QUESTION_TYPES = {RUBRIC_VERIFIER: "long_form", EXACT_VERIFIER: "exact_answer"}


def detect(rec: Mapping[str, Any]) -> bool:
    return "ground_truth" in rec and "messages" in rec


def dataset_of(rec: Mapping[str, Any]) -> Any:
    """The row's ``dataset`` (its verifier's name), the first when it is a list."""
    dataset = rec.get("dataset")
    return dataset[0] if isinstance(dataset, list) and dataset else dataset


def rubric_title(c: Mapping[str, Any]) -> str:
    """DR Tulu's short rubric label: the criterion's own title, else ``<id> <type>`` (or the id alone)."""
    return c.get("title") or " ".join(str(x) for x in (c["id"], c.get("type")) if x)


def _single(value: Any, what: str) -> Any:
    if isinstance(value, list):  # open-instruct allows a list of ground truths / datasets per row
        if len(value) != 1:
            raise ValueError(f"{len(value)} {what}s in one row (one is supported)")
        return value[0]
    return value


def to_rubricforge(rec: Mapping[str, Any], n: int) -> dict[str, Any]:
    truth = json_value(_single(rec["ground_truth"], "ground truth"), "ground_truth")
    question = truth.get("query") if isinstance(truth, dict) and truth.get("query") else user_text(rec["messages"])
    id_ = rec.get("id", n)
    if isinstance(truth, dict) and "rubrics" in truth:
        rubrics = truth["rubrics"]
        if not isinstance(rubrics, list):
            raise ValueError("ground_truth.rubrics is not a list")
        return rf_row(id_, question, [criterion(i, r.get("description"), r.get("weight"), r.get("title"))
                                      if isinstance(r, Mapping) else criterion(i, None, None)
                                      for i, r in enumerate(rubrics)])
    if isinstance(truth, dict):
        raise ValueError("ground_truth is an object without 'rubrics'")
    return rf_row(id_, question, **from_answers(truth))


def from_rubricforge(row: Mapping[str, Any], source: str = "rubricforge", verifier: str = RUBRIC_VERIFIER,
                     exact: bool = True) -> dict[str, Any]:
    """A rubric row (``dataset`` = ``verifier``) when the example has rubrics, else a short-answer row (when
    ``exact``)."""
    question = row["question"]
    if row.get("rubrics"):
        truth: Any = {"query": question, "rubrics": [{"description": r["description"], "weight": float(r["weight"]),
                                                      "title": rubric_title(r)} for r in row["rubrics"]]}
        dataset = verifier
    elif row.get("answer") and exact:
        truth, dataset = answers(row), EXACT_VERIFIER
    else:
        raise ValueError("no rubrics and no answer (DR Tulu rows need one)" if exact else "no rubrics")
    return {"id": row["id"], "source": source, "question_type": QUESTION_TYPES.get(dataset, "long_form"),
            "messages": [{"role": "user", "content": question}],
            "ground_truth": json.dumps(truth, ensure_ascii=False), "dataset": dataset}
