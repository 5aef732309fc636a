"""HealthBench-style rubrics (OpenAI's HealthBench JSONL): ``{"prompt_id", "prompt": [chat messages],
"rubrics": [{"criterion", "points", "tags"}], "example_tags"}``. Points may be negative; HealthBench's score is
Σ points met / Σ positive points, clipped to [0, 1] — rubricforge's rubric reward with the points as weights.
Only single-question conversations convert (a multi-turn conversation is rejected with the reason). A rubric's
``tags`` are kept in the criterion's ``tags`` (for the way back), not in its title: the judge sees a title, and
``level:example,axis:accuracy`` is not one.
"""

from __future__ import annotations

from rubricforge.export.convert._layout import Layout

NAME = "healthbench"
DESCRIPTION = "HealthBench-style rubrics: prompt_id + prompt messages + rubrics [{criterion, points, tags}]"
LAYOUT = Layout("HealthBench", question="prompt", rubrics="rubrics", text="criterion", weight="points", tags="tags",
                id="prompt_id", chat=True, constants={"example_tags": []})
detect, to_rubricforge, from_rubricforge = LAYOUT.detect, LAYOUT.to_rubricforge, LAYOUT.from_rubricforge
