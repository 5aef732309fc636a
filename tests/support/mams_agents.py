"""Scripted MaMs agents for the Report-RL teacher and ``eval --agent`` tests."""

from __future__ import annotations

import json
from typing import Any

from rubricforge.testing import Reply

def stepwise_teacher(body: dict[str, Any]) -> Reply:
    """The stepwise MaMs agents (JSON plan, searches, the first sentence of each chunk, outline, sections; one
    stage, told apart by their instructions)."""
    user = str(body["messages"][-1]["content"])
    if user.startswith("You are planning the research"):
        return Reply(json.dumps({"plan": ["the making of the film", "its reception", "its legacy today"]}))
    if user.startswith("You are researching the user input"):
        query = "Kubrick 2001 making" if "Next plan item: the making" in user else "2001 film reception"
        return Reply(json.dumps({"action": "search", "query": query}))
    if user.startswith("You maintain the memory"):
        ids = body["response_format"]["json_schema"]["schema"]["properties"]["sentence_ids"]
        return Reply(json.dumps({"sentence_ids": ids["items"]["enum"][:ids["minItems"]]}))
    if user.startswith("You are writing a deep research report"):
        n = body["response_format"]["json_schema"]["schema"]["properties"]["headings"]["minItems"]
        return Reply(json.dumps({"title": "The making of 2001", "headings": ["Making", "Release"][:n]}))
    if user.startswith("You are writing one section"):
        return Reply(json.dumps({"text": "These facts show how the film was made."}))
    raise AssertionError(f"no stepwise MaMs agent has this instruction: {user[:100]}")
