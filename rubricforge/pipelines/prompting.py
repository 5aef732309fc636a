"""Prompt files of the pipelines (``rubricforge/pipelines/prompts/<name>.md``), rendered and hashed.

A leading ``<!-- ... -->`` comment documents the file's origin for people and is not sent to the
model. A template fills ``{identifier}`` placeholders from keyword arguments in one pass; every other brace
(JSON examples such as ``{"queries": [...]}``) is left alone, and substituted values are never
re-read as template text. A placeholder without a value, or a value without a placeholder, is an
error, so a renamed variable cannot silently produce a half-filled prompt.

``prompt_hash(name)`` is a short sha256 of the file's bytes; it goes into every record's provenance
and the run manifest. The LLM cache needs no extra key: a changed template changes the rendered
messages, which are part of the request key.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).with_name("prompts")
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.S)


@cache
def _template(name: str) -> str:
    path = PROMPT_DIR / f"{name}.md"
    if not path.is_file():
        raise KeyError(f"no prompt template '{name}' in {PROMPT_DIR}")
    return _LEADING_COMMENT.sub("", path.read_text(encoding="utf-8")).strip()


def placeholders(name: str) -> set[str]:
    """The variable names a template expects."""
    return set(_PLACEHOLDER.findall(_template(name)))


def render(name: str, **variables: object) -> str:
    """The template ``name`` with every ``{var}`` replaced by ``str(variables[var])``."""
    text = _template(name)
    expected = set(_PLACEHOLDER.findall(text))
    if missing := expected - variables.keys():
        raise KeyError(f"prompt '{name}' needs values for: {', '.join(sorted(missing))}")
    if extra := variables.keys() - expected:
        raise KeyError(f"prompt '{name}' has no placeholder for: {', '.join(sorted(extra))}")
    return _PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]), text)


@cache
def prompt_hash(name: str) -> str:
    """Short content hash of a template file (12 hex digits of sha256)."""
    _template(name)  # a clear KeyError for an unknown name
    return hashlib.sha256((PROMPT_DIR / f"{name}.md").read_bytes()).hexdigest()[:12]


def prompt_hashes() -> dict[str, str]:
    """Every template of the pipelines: name -> content hash."""
    return {p.stem: prompt_hash(p.stem) for p in sorted(PROMPT_DIR.glob("*.md"))}
