"""verl-rubric rows (``DoYangTan/verl-rubric``, RuscaRL; RubricHub's asynchronous RuRL recipe): verl's RL row
``{"data_source", "prompt": [chat messages], "ability", "reward_model": {"style", "ground_truth"},
"extra_info"}`` whose criteria sit in ``extra_info.reward_model.rubrics`` as HealthBench's ``{"criterion",
"points", "tags"}`` (signed points). rubricforge writes the row's ``id`` beside them (rows read without one get
their row number), ``reward_model.style`` = ``rubric`` with an empty ``ground_truth``, and ``--source`` as
``data_source``.
"""

from __future__ import annotations

from rubricforge.export.convert._layout import Layout

NAME = "verlrubric"
DESCRIPTION = "verl-rubric rows: prompt messages + extra_info.reward_model.rubrics [{criterion, points, tags}]"
LAYOUT = Layout("verl-rubric", question="prompt", rubrics="extra_info.reward_model.rubrics", text="criterion",
                weight="points", tags="tags", source="data_source", chat=True,
                constants={"ability": "deep_research",
                           "reward_model": {"style": "rubric", "ground_truth": ""}})
detect, to_rubricforge, from_rubricforge = LAYOUT.detect, LAYOUT.to_rubricforge, LAYOUT.from_rubricforge
