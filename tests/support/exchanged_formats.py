"""Sample rows of the rubric layouts the field exchanges (issue 25), written from each project's published rows:
read by the converter tests and as task sets by the evaluation tests."""

from __future__ import annotations

RUBRICHUB = {"id": "rh-0193", "question": "Write a 300-word explainer on how mRNA vaccines work for a lay reader.",
             "rubrics": [{"criterion": "Explains that mRNA instructs cells to make a spike protein", "points": 10},
                         {"criterion": "Claims the vaccine alters the recipient's DNA", "points": -10},
                         {"criterion": "Stays within 270-330 words", "points": 3}]}
RESEARCHRUBRICS = {"sample_id": "6839f0a5c1", "prompt": "Compare the grid-scale storage options Germany could "
                   "deploy by 2035 and recommend one, with sources.",
                   "rubrics": [{"criterion": "Compares at least pumped hydro, lithium-ion and hydrogen storage",
                                "weight": 5, "axis": "Explicit Criteria"},
                               {"criterion": "Cites a source for every cost figure", "weight": 4, "axis": "References"},
                               {"criterion": "Recommends an option without justification", "weight": -3,
                                "axis": "Synthesis of Information"}]}
VERLRUBRIC = {"data_source": "healthbench", "ability": "medical_chat",
              "prompt": [{"role": "user", "content": "My toddler swallowed a button battery. What now?"}],
              "reward_model": {"style": "rubric", "ground_truth": ""},
              "extra_info": {"reward_model": {"rubrics": [
                  {"criterion": "Tells the parent to go to an emergency department immediately", "points": 10,
                   "tags": ["level:example", "axis:completeness"]},
                  {"criterion": "Suggests inducing vomiting", "points": -8, "tags": ["level:example", "axis:accuracy"]}]}}}
