"""Fixed and converted rubric sets for scoring reports with S(r|y) (Prefs Eq. 2).

* :data:`GENERAL_RUBRIC` — one query-independent rubric for every report: the "human-defined general
  rubrics" baseline of Prefs Table 1. The paper's set (Yao et al. 2025) is not printed, so this is
  rubricforge's own, in the C.1 item format, covering DeepResearch Bench's four RACE dimensions
  (comprehensiveness, insight/depth, instruction following, readability) plus factual accuracy and
  sourcing, with two error items.
* :func:`race_criteria` — a RACE rubric (MindDR App. 8.1) as weighted items: criterion c of dimension d
  gets weight W_d · w_c, its text is the criterion with its explanation.
* :func:`read_race_file` — RACE rubrics per query from a JSONL such as DeepResearch Bench's
  ``criteria.jsonl`` (``prompt`` → ``query``; ``id``, ``language`` and the per-criterion extras of some DRB
  records — ``comment``, ``aspect``, ``rationale_for_weight`` — dropped).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from rubricforge.errors import UserError, require_file
from rubricforge.schema import Criterion, RaceRubrics

_GENERAL = [
    ("Addresses the request", "Key Criterion: The report directly answers every part of the research request "
                              "and stays on its topic.", 5),
    ("Accurate factual content", "Key Criterion: Facts, figures and dates in the report are correct and "
                                 "consistent with each other.", 5),
    ("Comprehensive coverage", "Important Criterion: The report covers the main aspects of the topic with "
                               "enough detail and specific evidence.", 4),
    ("Depth of analysis", "Important Criterion: The report explains causes, trade-offs and implications "
                          "instead of only listing information.", 4),
    ("Clear structure", "Important Criterion: The report is organised in clear sections with a logical flow "
                        "and a conclusion.", 3),
    ("Supported by sources", "Important Criterion: Claims are attributed to identifiable, relevant sources "
                             "through citations or a reference list.", 3),
    ("Concise clear writing", "Optional Criterion: The writing is clear and concise, without filler or "
                              "repetition.", 2),
    ("Incorrect or invented claims", "Error Criterion: The report states incorrect facts or cites sources "
                                     "that do not support its claims.", -2),
    ("Irrelevant padding", "Error Criterion: The report contains generic filler sentences or content "
                           "unrelated to the request.", -1),
]
GENERAL_RUBRIC = [Criterion(id=f"G{n}", type="logical", title=t, description=d, weight=w)
                  for n, (t, d, w) in enumerate(_GENERAL, start=1)]


_RACE_KEYS = {"criterion", "explanation", "weight"}


def race_criteria(rubrics: RaceRubrics) -> list[Criterion]:
    """A RACE rubric's criteria with weight W_d · w_c (dimensions without weight or criteria are left out)."""
    out = []
    for dim, criteria in rubrics.criterions.items():
        weight = rubrics.dimension_weight.get(dim, 0.0)
        for n, c in enumerate(criteria, start=1):
            if weight > 0 and c.weight > 0:
                out.append(Criterion(id=f"{dim}-{n}", type="logical", title=c.criterion,
                                     description=c.explanation or c.criterion, weight=weight * c.weight))
    return out


def read_race_file(path: str | Path) -> dict[str, RaceRubrics]:
    """query -> RACE rubric from a JSONL of RaceRubrics records or DeepResearch Bench criteria records."""
    path = require_file(path, "RACE rubric file", "pass a JSONL of RACE rubrics (e.g. DRB's criteria.jsonl)")
    out = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                record = {"query": raw.get("query") or raw["prompt"], "dimension_weight": raw["dimension_weight"],
                          "criterions": {d: [{k: v for k, v in c.items() if k in _RACE_KEYS} for c in cs]
                                         for d, cs in raw["criterions"].items()}}
                rubric = RaceRubrics.model_validate(record)
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValidationError) as exc:
                raise UserError(f"{path} line {n} is not a RACE rubric ({type(exc).__name__}: {str(exc)[:80]})",
                                "give {query or prompt, dimension_weight, criterions} per line") from None
            out[rubric.query.strip()] = rubric
    return out
