"""RubricHub (``sojuL/RubricHub_v1``, the rubric data of RuRL / RuFT): ``{"question", "id", "rubrics":
[{"criterion", "points"}]}``. Points are the criterion's weight and may be negative (a pitfall), as in
HealthBench, whose score RubricHub's graders reuse.
"""

from __future__ import annotations

from rubricforge.export.convert._layout import Layout

NAME = "rubrichub"
DESCRIPTION = "RubricHub: id + question + rubrics [{criterion, points}]"
LAYOUT = Layout("RubricHub", question="question", rubrics="rubrics", text="criterion", weight="points")
detect, to_rubricforge, from_rubricforge = LAYOUT.detect, LAYOUT.to_rubricforge, LAYOUT.from_rubricforge
