"""Prompt files of the pipelines (``rubricforge/pipelines/prompts/<name>.md``), rendered and hashed
(see :mod:`rubricforge.prompt_files` for the template rules). :func:`prompt_hashes` also covers the rubric
generators' prompts (:mod:`rubricforge.rubric_gen.prompting`) that the pipelines call."""

from __future__ import annotations

from pathlib import Path

from rubricforge.prompt_files import PromptFiles
from rubricforge.rubric_gen.prompting import PROMPTS as RUBRIC_GEN_PROMPTS

PROMPT_DIR = Path(__file__).with_name("prompts")
_FILES = PromptFiles(PROMPT_DIR)

placeholders = _FILES.placeholders
template = _FILES.text
render = _FILES.render
prompt_hash = _FILES.prompt_hash


def prompt_hashes() -> dict[str, str]:
    """Every template of the pipelines and of the rubric generators: name -> content hash."""
    return {**_FILES.prompt_hashes(), **RUBRIC_GEN_PROMPTS.prompt_hashes()}
