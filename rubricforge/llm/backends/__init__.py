"""The backend interface and its three implementations (litellm, embedded local, replay).

A backend turns one :class:`Request` into one :class:`Completion`, enforcing the request's JSON schema
where it can. It raises :class:`TransientError` for what is worth retrying, :class:`RequestFailed` for a
request that cannot succeed, and :class:`UserError` for configuration mistakes.
"""

from __future__ import annotations

from typing import Protocol

from rubricforge.config import LLMConfig, RoleConfig
from rubricforge.llm.request import Completion, Request


class Backend(Protocol):
    name: str

    async def prepare(self, role: str, role_cfg: RoleConfig) -> None:
        """Check a role's settings once before its first request (raise UserError with the fix)."""

    async def complete(self, request: Request, role_cfg: RoleConfig) -> Completion: ...


def make_backend(kind: str, cfg: LLMConfig) -> Backend:
    if kind == "litellm":
        from rubricforge.llm.backends.litellm_backend import LiteLLMBackend

        return LiteLLMBackend()
    if kind == "local":
        from rubricforge.llm.backends.local import LocalBackend

        return LocalBackend(cfg.model_dir)
    if kind == "replay":
        from rubricforge.llm.backends.replay import ReplayBackend

        return ReplayBackend(cfg.replay_path)
    raise ValueError(f"unknown backend {kind!r}")  # the config's Literal makes this unreachable for users
