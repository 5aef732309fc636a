"""Stage tables for :class:`rubricforge.testing.FakeOpenAI`: a scripted judge and rubric generator for rubrics
learned from preferences (:data:`PREFS_JUDGE`), and the Report-RL data generator (:data:`REPORT_WRITER`).

* C.1 (rubric generation): answers App. I's 13-item rubric; DeepRubric's closed-book writer: 5 criteria.
* C.2 (one item, ``rating: n``): a report containing ``GOOD`` matches positive items (9) and not error
  items (4); any other report the reverse; a report containing ``BROKEN`` gets an answer without a rating.
* C.3 (rubric judging): ``reward: 3.25``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from support.paths import DATA

APP_I = json.loads((DATA / "prefs" / "app_i_rubric.json").read_text())["rubrics"]


def _prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body["messages"])


def _field(prompt: str, name: str, until: str | None) -> str:
    start = prompt.index(name) + len(name)
    return prompt[start:prompt.index(until, start)] if until else prompt[start:]


def _rate(body: dict[str, Any]) -> str:
    prompt = _prompt(body)
    report = _field(prompt, "Report to be scored:", "\nRubric:")
    if "BROKEN" in report:
        return "I would rather not rate this report."
    error = bool(re.search(r"error criterion", _field(prompt, "\nRubric:", None), re.I))
    return f"rating: {9 if ('GOOD' in report) != error else 4}"


PREFS_JUDGE = {
    "pref_rubrics": json.dumps(APP_I),
    "baseline-*": json.dumps({"rubrics": [{"id": f"R{i}", "type": "logical", "description": f"Criterion {i}.",  # DeepRubric
                                           "weight": 0.5, "source_leaf_ids": [], "evidence": []} for i in range(1, 6)]}),
    "pref_item*": _rate,
    "rubric_quality": "reward: 3.25\nconfidence: 80%\nreason: scripted",
}

RACE_ANSWER = {"dimension_weight": {"comprehensiveness": 2, "insight": 1, "instruction_following": 1, "readability": 0},
               "criterions": {d: [{"criterion": f"{d} criterion", "explanation": "why", "weight": 1}]
                              for d in ("comprehensiveness", "insight", "instruction_following", "readability")}}
# the generator of Report-RL data: RACE rubrics (App. 8.1; a query with BROKEN gets no rubric) and reference
# reports (App. 8.2)
REPORT_WRITER = {
    "reference_report": "# Reference report\n\n## Findings\n\nScripted findings.\n\n## Summary\n\nScripted summary.",
    "race_rubrics": lambda body: "not a rubric" if "BROKEN" in _prompt(body) else json.dumps(RACE_ANSWER),
}
