"""ResearchRubrics (Scale AI's deep-research benchmark): ``{"sample_id", "prompt", "rubrics": [{"criterion",
"weight", "axis"}]}`` with ``prompt`` a plain string. Weights are signed (negative: a criterion a good report
must not meet); the ``axis`` (explicit / implicit requirement, synthesis, references, communication, ...) is kept
as the criterion's title, the label the judge sees.
"""

from __future__ import annotations

from rubricforge.export.convert._layout import Layout

NAME = "researchrubrics"
DESCRIPTION = "ResearchRubrics: sample_id + prompt (text) + rubrics [{criterion, weight, axis}]"
LAYOUT = Layout("ResearchRubrics", question="prompt", rubrics="rubrics", text="criterion", weight="weight",
                title="axis", id="sample_id")
detect, to_rubricforge, from_rubricforge = LAYOUT.detect, LAYOUT.to_rubricforge, LAYOUT.from_rubricforge
