"""Hand-built rollouts and a scripted judge for the reward tests.

:data:`SCRIPTED_JUDGE` (a stage table for :class:`rubricforge.testing.FakeOpenAI`) answers each judge
stage the way a fixed judge would: rubric scores by criterion id (:data:`SCORES`), citation verdicts by
statement (:data:`SUPPORT`, :data:`RELEVANT`, :data:`NEEDS`), ORM votes by the request's seed (:data:`VOTES`),
RACE 6 vs 4 on every criterion, and "no institution" for the tense check.
"""

from __future__ import annotations

import json
import re
from typing import Any


S1, S2, BAD = "s1aaaaaaaaa", "s2bbbbbbbbb", "sxxxxxxxxxx"
QUESTION = "How tall is the Eiffel Tower and when was it completed?"
ANSWER = (f'The tower stands in Paris. <cite id="{S1}">The Eiffel Tower is 330 metres tall.</cite> '
          f'<cite id="{S2}, {BAD}">It was completed in 1889 for the World\'s Fair.</cite>')
ROLLOUT = (
    "<think>I need the height and the completion date.</think>\n"
    '<tool_call>{"name": "search", "arguments": {"query": ["Eiffel Tower height"]}}</tool_call>\n'
    f"<tool_response><snippet id={S1}>The Eiffel Tower is 330 metres tall.</snippet>"
    f"<snippet id={S2}>It was completed in 1889 for the World's Fair.</snippet></tool_response>\n"
    f"<think>Both facts are in the snippets.</think>\n<answer>{ANSWER}</answer>")
RUBRICS = [
    {"id": "c1", "type": "factual", "description": "States the height of 330 metres.", "weight": 1.0,
     "evidence": ["The Eiffel Tower is 330 metres tall."]},
    {"id": "c2", "type": "logical", "description": "Relates the completion to the World's Fair.", "weight": 0.5},
    {"id": "c3", "type": "factual", "description": "Claims the tower is in London (a pitfall).", "weight": -0.5},
]
EXAMPLE = {"id": "ex1", "question": QUESTION, "rubrics": RUBRICS, "answer": "1889", "answer_aliases": ["in 1889"],
           "key_entities": ["Eiffel Tower", "World's Fair", "Gustave Eiffel"]}
SCORES = {"c1": 4, "c2": 2, "c3": 0}
SUPPORT = {"The Eiffel Tower is 330 metres tall.": "Fully supported",
           "It was completed in 1889 for the World's Fair.": "Partially supported"}
RELEVANT = {"The Eiffel Tower is 330 metres tall.": "Relevant",
            "It was completed in 1889 for the World's Fair.": "Relevant"}
NEEDS = {"The tower stands in Paris.": "No"}
RACE = {"query": QUESTION, "dimension_weight": {"comprehensiveness": 0.4, "insight": 0.3, "instruction_following": 0.2,
                                                "readability": 0.1},
        "criterions": {d: [{"criterion": f"{d} criterion", "explanation": "", "weight": 1.0}]
                       for d in ("comprehensiveness", "insight", "instruction_following", "readability")}}
VOTES = {0: 1, 1: 0, 2: 1}


def _between(text: str, tag: str) -> str:
    found = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.S)
    return found.group(1) if found else ""


def _prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body["messages"])


def _statement(body: dict[str, Any]) -> str:
    return _between(_prompt(body), "statement")


def _race(body: dict[str, Any]) -> str:
    """RACE: the target scores 6 on every criterion, the reference 4."""
    criteria = json.loads(_between(_prompt(body), "criteria_list"))
    return json.dumps({d: [{"criterion": c["criterion"], "analysis": "scripted", "article_1_score": 6,
                            "article_2_score": 4} for c in cs] for d, cs in criteria.items()})


def _support(body: dict[str, Any]) -> str:
    return f"Rating: [[{SUPPORT[_statement(body)]}]] Analysis: scripted."


SCRIPTED_JUDGE: dict[str, Any] = {
    "rubric": lambda body: json.dumps({"score": SCORES[re.search(r"<criterion>ID: (\w+)", _prompt(body)).group(1)]}),
    "rubric_batched": json.dumps({"scores": [{"id": c, "score": s} for c, s in SCORES.items()]}),
    "citation_needs": lambda body: f"Need Citation: [[{NEEDS[_statement(body)]}]] Analysis: scripted.",
    "citation_recall": _support,
    "fact_support": _support,
    "citation_precision": lambda body: f"Rating: [[{RELEVANT[_statement(body)]}]] Analysis: scripted.",
    "orm": lambda body: json.dumps({"rationale": "scripted", "correct": VOTES[int(body.get("seed", 0))]}),
    "race": _race,
    "tense": json.dumps({"result": "no", "detail": "none named"}),
}
