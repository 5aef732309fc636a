"""The ReAct-style episode (DeepRubric App. D): the agent thinks, calls tools, reads their results, and answers.

``sampler.turn(messages, tools)`` is any policy that returns one parsed assistant message (a local model with
TRL's response parser in ``rubricforge rollouts sample``, or a scripted one in tests); the tools are the
episode's :class:`~rubricforge.agent.environment.ResearchEnvironment`.
"""

from __future__ import annotations

from typing import Any

from rubricforge.agent.environment import ResearchEnvironment


def as_text_thought(message: dict[str, Any]) -> dict[str, Any]:
    """TRL's parser moves ``<think>`` into ``reasoning_content``, which Qwen2.5's template does not render: put
    it back into the content so later turns (and SFT on the trajectory) see the thought."""
    message = dict(message)
    if reasoning := message.pop("reasoning_content", None):
        message["content"] = f"<think>{reasoning}</think>\n{message.get('content') or ''}"
    return message


def run_episode(sampler: Any, env: ResearchEnvironment, prompt: list[dict[str, Any]], max_tool_turns: int) -> list[dict[str, Any]]:
    """One trajectory: assistant turns and tool results until an answer without tool calls (or the cap)."""
    tools = [env.search, env.browse, env.scholar]
    messages = list(prompt)
    for turn in range(max_tool_turns + 1):
        message = as_text_thought(sampler.turn(messages, tools))
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls or turn == max_tool_turns:
            break
        for call in calls:
            function = call.get("function") or {}
            name = str(function.get("name", ""))
            messages.append({"role": "tool", "name": name, "content": env.toolbox.call(name, function.get("arguments"))})
    return messages[len(prompt):]
