"""Prompt files of the pipelines (``rubricforge/pipelines/prompts/<name>.md``), rendered and hashed
(see :mod:`rubricforge.prompt_files` for the template rules)."""

from __future__ import annotations

from pathlib import Path

from rubricforge.prompt_files import PromptFiles

PROMPT_DIR = Path(__file__).with_name("prompts")
_FILES = PromptFiles(PROMPT_DIR)

placeholders = _FILES.placeholders
render = _FILES.render
prompt_hash = _FILES.prompt_hash
prompt_hashes = _FILES.prompt_hashes
