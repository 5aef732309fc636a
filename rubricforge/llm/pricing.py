"""What an LLM call costs before it is made: tokens estimated from characters, a prompt template's own tokens,
and a model's USD per token from litellm's bundled price table. Used by the cost lines that ``train`` and
``eval --agent`` print before their first call."""

from __future__ import annotations

from rubricforge.config import RoleConfig
from rubricforge.prompt_files import PromptFiles

CHARS_PER_TOKEN = 4


def price(role: RoleConfig) -> tuple[float, float] | None:
    """USD per input and output token of ``role``'s model from litellm's bundled table (None: local, replayed, or
    not in the table)."""
    if role.backend != "litellm":
        return None
    from rubricforge.llm.backends.openai_http import _prices

    name = role.model.split("/", 1)[1] if "/" in role.model else role.model
    return _prices(role.model) or _prices(name)


def template_tokens(prompts: PromptFiles, name: str) -> float:
    """A prompt's own text (system and user templates, placeholders left in), in tokens."""
    files = [prompts.folder / f"{name}.{part}.md" for part in ("system", "user")]
    return sum(len(f.read_text(encoding="utf-8")) for f in files if f.is_file()) / CHARS_PER_TOKEN
