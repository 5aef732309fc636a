"""The deep-research agent's system prompt (DeepRubric App. D.1, Figures 13–14), shared by the dataset's
TRL view and the trainer.

The text lives in ``rubricforge/prompts/agent_system.md``; a leading ``<!-- ... -->`` comment there
documents its origin and is not part of the prompt. :func:`prompt_hash` is a short sha256 of the
file's bytes, recorded next to every exported prompt so a changed prompt is visible in the data.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

PROMPT_FILE = Path(__file__).with_name("prompts") / "agent_system.md"
NO_TOOL_FILE = PROMPT_FILE.with_name("agent_no_tool.md")
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.S)


@cache
def agent_system_prompt() -> str:
    """The system prompt, exactly as the agent sees it."""
    return _LEADING_COMMENT.sub("", PROMPT_FILE.read_text(encoding="utf-8")).strip()


@cache
def no_tool_system_prompt() -> str:
    """HOTE's no-tool mode (§2.1, Fig. 17 is an image; the text of docs/methods.md H-6): one think, then
    the report, with the same tags as the tool mode's answer."""
    return _LEADING_COMMENT.sub("", NO_TOOL_FILE.read_text(encoding="utf-8")).strip()


@cache
def prompt_hash() -> str:
    """12 hex digits of the sha256 of the prompt file (the same scheme as the pipelines' prompt hashes)."""
    return hashlib.sha256(PROMPT_FILE.read_bytes()).hexdigest()[:12]


def agent_messages(question: str) -> list[dict[str, str]]:
    """A conversational prompt: the agent's system prompt, then ``question`` as the user's turn."""
    return [{"role": "system", "content": agent_system_prompt()}, {"role": "user", "content": question}]
