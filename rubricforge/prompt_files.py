"""Prompt template files (``<folder>/<name>.md``), rendered and hashed: :class:`PromptFiles`.

A leading ``<!-- ... -->`` comment documents the file's origin for people and is not sent to the
model. A template fills ``{identifier}`` placeholders from keyword arguments in one pass; every other brace
(JSON examples such as ``{"queries": [...]}``) is left alone, and substituted values are never
re-read as template text. A placeholder without a value, or a value without a placeholder, is an
error, so a renamed variable cannot silently produce a half-filled prompt.

``prompt_hash(name)`` is a short sha256 of the file's bytes; it goes into records' provenance and
manifests. The LLM cache needs no extra key: a changed template changes the rendered messages, which
are part of the request key.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.S)


class PromptFiles:
    """The templates of one folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._template = cache(self._read)
        self.prompt_hash = cache(self._hash)

    def _read(self, name: str) -> str:
        path = self.folder / f"{name}.md"
        if not path.is_file():
            raise KeyError(f"no prompt template '{name}' in {self.folder}")
        return _LEADING_COMMENT.sub("", path.read_text(encoding="utf-8")).strip()

    def text(self, name: str) -> str:
        """The template ``name`` as the model sees it (leading comment removed), placeholders unfilled."""
        return self._template(name)

    def placeholders(self, name: str) -> set[str]:
        """The variable names a template expects."""
        return set(_PLACEHOLDER.findall(self._template(name)))

    def render(self, name: str, **variables: object) -> str:
        """The template ``name`` with every ``{var}`` replaced by ``str(variables[var])``."""
        text = self._template(name)
        expected = set(_PLACEHOLDER.findall(text))
        if missing := expected - variables.keys():
            raise KeyError(f"prompt '{name}' needs values for: {', '.join(sorted(missing))}")
        if extra := variables.keys() - expected:
            raise KeyError(f"prompt '{name}' has no placeholder for: {', '.join(sorted(extra))}")
        return _PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]), text)

    def _hash(self, name: str) -> str:
        """Short content hash of a template file (12 hex digits of sha256)."""
        self._template(name)  # a clear KeyError for an unknown name
        return hashlib.sha256((self.folder / f"{name}.md").read_bytes()).hexdigest()[:12]

    def messages(self, name: str, **variables: object) -> list[dict[str, str]]:
        """The chat messages of prompt ``name``: ``<name>.system`` (when the folder has it), then
        ``<name>.user`` rendered with ``variables``."""
        out = []
        if (self.folder / f"{name}.system.md").is_file():
            out.append({"role": "system", "content": self.render(f"{name}.system")})
        out.append({"role": "user", "content": self.render(f"{name}.user", **variables)})
        return out

    def prompt_hashes(self) -> dict[str, str]:
        """Every template of the folder: name -> content hash."""
        return {p.stem: self.prompt_hash(p.stem) for p in sorted(self.folder.glob("*.md"))}
