"""Rubrics as Rewards (RaR; ``anisha2102/RaR-Medicine-20k-o3-mini``, ``RaR-Science-20k-o3-mini``): ``question``,
``reference_answer`` and ``rubric``, a list of ``{"description", "title", "weight"}`` (weights may be
negative: pitfall criteria); no id. DR Tulu converts RaR rows to its rubric rows unchanged in content.
"""

from __future__ import annotations

from rubricforge.export.convert._layout import Layout

NAME = "rar"
DESCRIPTION = "RaR (Rubrics as Rewards): question + reference_answer + rubric [{description, title, weight}]"
LAYOUT = Layout("RaR", question="question", rubrics="rubric", text="description", weight="weight", title="title",
                id=None, columns={"reference_answer": "reference_answer"})
detect, to_rubricforge, from_rubricforge = LAYOUT.detect, LAYOUT.to_rubricforge, LAYOUT.from_rubricforge
