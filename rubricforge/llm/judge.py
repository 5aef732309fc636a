"""LLM-as-judge calls, for rewards and rubric generators alike: one LLM role asked with the prompt files
of one folder, and the rule that a judge that fails is *unscored* (None), never 0.

A prompt ``name`` is ``<name>.user.md`` plus, when present, ``<name>.system.md`` in the judge's folder
(:meth:`~rubricforge.prompt_files.PromptFiles.messages`). Every call goes through
:class:`~rubricforge.llm.LLMClient`, so it is cached (re-scoring the same rollout is free and identical),
retried, re-prompted on unreadable output and rate-limited. A ``check`` refuses a valid answer that is not
complete (a criterion left out): it is resampled like an unreadable one — re-prompted with what is missing, at
most the role's ``structured_retries`` times, never cached and never replayed from the cache — and stays
unscored when every attempt falls short. :class:`Judge` counts calls and unscored
answers per stage so reports and trainers can say how much was left unscored.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TypeVar

from pydantic import BaseModel

from rubricforge.llm.structured import TextAnswer

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient
    from rubricforge.prompt_files import PromptFiles

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)


class LabelAnswer(TextAnswer):
    """A judge verdict written as ``<PREFIX>: [[<label>]]`` (DeepRubric Figs. 6–8). Only the labels of
    ``LABELS`` are accepted (case and spacing aside); anything else is unreadable and re-prompted.
    ``FORMAT`` is derived from them."""

    PREFIX: ClassVar[str]
    LABELS: ClassVar[tuple[str, ...]]
    label: str

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: object) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.FORMAT = f"{cls.PREFIX}: [[{' | '.join(cls.LABELS)}]] Analysis: ..."

    @classmethod
    def from_text(cls, text: str) -> LabelAnswer:
        found = re.search(re.escape(cls.PREFIX) + r"\s*:?\s*\*{0,2}\s*\[\[([^\]]+)\]\]", text, re.I)
        if found is None:
            found = re.search(r"\[\[([^\]]+)\]\]", text)  # the label without its prefix
        if found is None:
            raise ValueError(f"no '{cls.PREFIX}: [[...]]' verdict in the answer")
        said = " ".join(found.group(1).split()).lower()
        for label in cls.LABELS:
            if said == label.lower():
                return cls(label=label)
        raise ValueError(f"'{found.group(1)}' is not one of: {', '.join(cls.LABELS)}")


class Judge:
    """One LLM role used as a judge with the prompts of ``prompts``. ``ask`` returns the validated output,
    or None when the call failed after the client's retries (logged and counted as unscored)."""

    def __init__(self, client: LLMClient, role: str = "judge", *, prompts: PromptFiles):
        client.cfg.role(role)  # an unknown role fails here, clearly
        self.client, self.role, self.prompts = client, role, prompts
        self.calls: Counter[str] = Counter()
        self.unscored: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return self.client.model_name(self.role)

    async def ask(self, prompt: str, output: type[T], *, stage: str, seed: int | None = None,
                  check: Callable[[T], str | None] | None = None, **variables: object) -> T | None:
        """``check(answer)``: None when a valid answer is complete, else what it lacks (see the module docstring)."""
        return await self.ask_messages(self.prompts.messages(prompt, **variables), output, stage=stage, seed=seed,
                                       check=check)

    async def ask_messages(self, messages: list[dict[str, str]], output: type[T], *, stage: str,
                           seed: int | None = None, check: Callable[[T], str | None] | None = None) -> T | None:
        """:meth:`ask` with the messages given (a multi-turn judge, e.g. one that searches between turns)."""
        result = await self.client.generate(self.role, messages, output=output, stage=stage, seed=seed, check=check)
        with self._lock:
            self.calls[stage] += 1
            if not result.ok:
                self.unscored[stage] += 1
        if not result.ok:
            log.warning("judge %s (%s) left unscored: %s", stage, self.model, result.error)
            return None
        return result.value

    def counts(self) -> dict[str, dict[str, int]]:
        """Calls and unscored answers per stage."""
        with self._lock:
            return {"calls": dict(self.calls), "unscored": dict(self.unscored)}
