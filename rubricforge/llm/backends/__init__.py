"""The backend interface and its implementations: litellm, a direct OpenAI-compatible HTTP client, the
embedded local model, replay; and the backends of plugins (entry-point group ``rubricforge.backends``,
:mod:`rubricforge.plugins`).

A backend turns one :class:`Request` into one :class:`Completion`, enforcing the request's JSON schema
where it can. It raises :class:`TransientError` for what is worth retrying, :class:`RequestFailed` for a
request that cannot succeed, and :class:`UserError` for configuration mistakes.

A ``litellm`` role whose model is ``openai/<name>`` or ``hosted_vllm/<name>`` with an ``api_base`` (vLLM,
llama.cpp, SGLang, any OpenAI-compatible server) goes through the direct HTTP client
(:mod:`.openai_http`): the same request, about a tenth of litellm's CPU per call. Every other litellm
model goes through litellm.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Protocol

from rubricforge.config import LLMConfig, RoleConfig
from rubricforge.errors import UserError
from rubricforge.llm.request import Completion, Request

MODES = ("json_schema", "json_object", "plain")  # structured-output modes, best first
DIRECT_PREFIXES = ("openai/", "hosted_vllm/")
log = logging.getLogger(__name__)


class Backend(Protocol):
    name: str

    async def prepare(self, role: str, role_cfg: RoleConfig) -> None:
        """Check a role's settings once before its first request (raise UserError with the fix)."""

    async def complete(self, request: Request, role_cfg: RoleConfig) -> Completion: ...


def backend_kind(role_cfg: RoleConfig) -> str:
    """The backend that serves a role: its ``backend``, with ``litellm`` to an OpenAI-compatible
    ``api_base`` served by the direct client (``openai-http``)."""
    if role_cfg.backend == "litellm" and role_cfg.api_base and role_cfg.model.startswith(DIRECT_PREFIXES):
        return "openai-http"
    return role_cfg.backend


def make_backend(kind: str, cfg: LLMConfig) -> Backend:
    if kind == "openai-http":
        from rubricforge.llm.backends.openai_http import OpenAIHTTPBackend

        return OpenAIHTTPBackend()
    if kind == "litellm":
        from rubricforge.llm.backends.litellm_backend import LiteLLMBackend

        return LiteLLMBackend()
    if kind == "local":
        from rubricforge.llm.backends.local import LocalBackend

        return LocalBackend(cfg.model_dir)
    if kind == "replay":
        from rubricforge.llm.backends.replay import ReplayBackend

        return ReplayBackend(cfg.replay_path)
    from rubricforge.config import BACKENDS
    from rubricforge.plugins import added

    plugin = added("backends", (*BACKENDS, "openai-http")).get(kind)
    if plugin is None:  # the config's validator makes this unreachable for users
        raise ValueError(f"unknown backend {kind!r}")
    return plugin(cfg)  # a plugin's Backend, made from the LLM config


def role_api_key(role: str, role_cfg: RoleConfig) -> str | None:
    """The key in the variable named by ``api_key_env`` (read at each request, never kept); None if unnamed."""
    if not role_cfg.api_key_env:
        return None
    key = os.environ.get(role_cfg.api_key_env)
    if not key:
        raise UserError(f"environment variable {role_cfg.api_key_env} (the API key of llm.{role}, model "
                        f"{role_cfg.model}) is not set", f"export {role_cfg.api_key_env}=<your key>")
    return key


def response_format(request: Request, mode: str) -> dict[str, Any] | None:
    """The OpenAI ``response_format`` for a request in a structured-output mode (None: plain text). In
    ``json_object`` mode a self-hosted server (``api_base``) is also sent the schema, which llama.cpp's and
    llama-cpp-python's servers turn into a grammar."""
    if request.schema is None or mode == "plain":
        return None
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": request.schema_name or "output",
                                                       "schema": request.schema, "strict": False}}
    return {"type": "json_object", "schema": request.schema} if request.api_base else {"type": "json_object"}


class StructuredModes:
    """The structured-output mode of each model and server: ``llm.<role>.structured`` when it is set, else the
    backend's best guess, stepped down to the next of :data:`MODES` when the server refuses a request with an
    error that names ``response_format`` or ``json_schema`` — whatever its status code (llama-cpp-python's
    server answers ``json_schema`` with HTTP 500) — and remembered for the later requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modes: dict[tuple[str, str | None], str] = {}

    def start(self, role_cfg: RoleConfig, best: str) -> None:
        with self._lock:
            self._modes.setdefault((role_cfg.model, role_cfg.api_base), best)

    def mode(self, request: Request, role_cfg: RoleConfig) -> str:
        if role_cfg.structured != "auto":
            return role_cfg.structured
        return self._modes.get((request.model, request.api_base), MODES[0])

    def step_down(self, request: Request, role_cfg: RoleConfig, mode: str, error_text: str) -> bool:
        """True (and the next mode in place) when ``error_text`` refuses ``mode``; never for a set mode."""
        said = error_text.lower()
        if (role_cfg.structured != "auto" or request.schema is None or mode == "plain"
                or ("response_format" not in said and "json_schema" not in said)):
            return False
        lower = MODES[MODES.index(mode) + 1]
        with self._lock:
            if self._modes.get((request.model, request.api_base)) != mode:
                return True  # another request stepped down already
            self._modes[(request.model, request.api_base)] = lower
        log.warning("%s (llm.%s) at %s refused structured output '%s' (%s); using '%s' (set llm.%s.structured=%s "
                    "to start there)", request.model, request.role, request.api_base or "the provider", mode,
                    " ".join(error_text.split())[:160], lower, request.role, lower)
        return True
