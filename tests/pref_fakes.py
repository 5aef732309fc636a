"""A scripted seed-004 judge and rubric generator for the scripted OpenAI server (:mod:`llm_fakes`).

* C.1 (rubric generation): answers App. I's 13-item rubric; DeepRubric's closed-book writer: 5 criteria.
* C.2 (one item, ``rating: n``): a report containing ``GOOD`` matches positive items (9) and not error
  items (4); any other report the reverse; a report containing ``BROKEN`` gets an answer without a rating.
* C.3 (rubric judging): ``reward: 3.25``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from llm_fakes import Reply

APP_I = json.loads((Path(__file__).parent / "data" / "prefs" / "app_i_rubric.json").read_text())["rubrics"]


def _field(prompt: str, name: str, until: str | None) -> str:
    start = prompt.index(name) + len(name)
    return prompt[start:prompt.index(until, start)] if until else prompt[start:]


def prefs_judge(body: dict[str, Any]) -> Reply:
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    if "professional rubric-writing expert" in prompt:
        return Reply(json.dumps(APP_I))
    if "You write evaluation rubrics for a deep-research question" in prompt:  # DeepRubric's closed-book writer
        return Reply(json.dumps({"rubrics": [{"id": f"R{i}", "type": "logical", "description": f"Criterion {i}.",
                                              "weight": 0.5, "source_leaf_ids": [], "evidence": []}
                                             for i in range(1, 6)]}))
    if "precise and impartial scoring model" in prompt:
        report = _field(prompt, "Report to be scored:", "\nRubric:")
        rubric = _field(prompt, "\nRubric:", None)
        if "BROKEN" in report:
            return Reply("I would rather not rate this report.")
        good = "GOOD" in report
        error = bool(re.search(r"error criterion", rubric, re.I))
        return Reply(f"rating: {9 if good != error else 4}")
    if "evaluate the quality of **rubrics**" in prompt:
        return Reply("reward: 3.25\nconfidence: 80%\nreason: scripted")
    raise AssertionError(f"unexpected prompt: {prompt[:200]}")


RACE_ANSWER = {"dimension_weight": {"comprehensiveness": 2, "insight": 1, "instruction_following": 1, "readability": 0},
               "criterions": {d: [{"criterion": f"{d} criterion", "explanation": "why", "weight": 1}]
                              for d in ("comprehensiveness", "insight", "instruction_following", "readability")}}


def report_writer(body: dict[str, Any]) -> Reply:
    """The generator of Report-RL data: RACE rubrics (App. 8.1) and reference reports (App. 8.2)."""
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    if "considering the following dimensions" in prompt:
        return Reply("# Reference report\n\n## Findings\n\nScripted findings.\n\n## Summary\n\nScripted summary.")
    if "BROKEN" in prompt:
        return Reply("not a rubric")
    return Reply(json.dumps(RACE_ANSWER))
