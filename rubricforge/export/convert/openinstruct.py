"""Upstream open-instruct rubric rows (``allenai/open-instruct``): DR Tulu's row layout (:mod:`.drtulu`) with
``dataset`` = ``rubric``, the name of open-instruct's ``RubricVerifier``, which reads ``ground_truth`` as JSON
``{"query", "rubrics": [{"description", "weight"}]}`` and returns the weighted average of the criteria's scores.
Only rubric rows are written (short-answer rows belong to DR Tulu's ``rl_rag_exact_answer`` verifier).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rubricforge.export.convert import drtulu

NAME = "openinstruct"
DESCRIPTION = "upstream open-instruct rubric rows: messages + ground_truth {query, rubrics} + dataset 'rubric'"
VERIFIER = "rubric"
to_rubricforge = drtulu.to_rubricforge


def detect(rec: Mapping[str, Any]) -> bool:
    return drtulu.detect(rec) and str(drtulu.dataset_of(rec)).lower() == VERIFIER


def from_rubricforge(row: Mapping[str, Any], source: str = "rubricforge") -> dict[str, Any]:
    return drtulu.from_rubricforge(row, source, VERIFIER, exact=False)
