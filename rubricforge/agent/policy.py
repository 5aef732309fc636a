"""An LLM client's role as the agent's policy. The episode runners (:mod:`~rubricforge.agent.mams`) are
synchronous and run in a worker thread; the client is async and lives on the event loop: :func:`client_policy`
bridges the two, one call at a time per episode."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient


class PolicyFailed(Exception):
    """A policy call failed after its retries: the episode is unfinished, not a shorter one."""


def client_policy(client: LLMClient, role: str, stage: str, loop: asyncio.AbstractEventLoop
                  ) -> Callable[..., Any]:
    """``ask(messages, output=None)`` from the episode's thread: the answer's text, or its value as ``output``
    (a pydantic model, the backend's grammar where it has one); :class:`PolicyFailed` when the call failed."""

    def ask(messages: list[dict[str, str]], output: type[BaseModel] | None = None) -> Any:
        res = asyncio.run_coroutine_threadsafe(client.generate(role, messages, output=output, stage=stage),
                                               loop).result()
        if not res.ok or (output is not None and res.value is None):
            raise PolicyFailed(res.error or f"{role} call failed")
        return res.text if output is None else res.value

    return ask
