"""litellm backend: any provider litellm knows, a vLLM server (``hosted_vllm/<model>`` + ``api_base``) or any
OpenAI-compatible server (``openai/<alias>`` + ``api_base``, e.g. llama.cpp's server).

The API key is read from the environment variable named by ``api_key_env`` at each request (never kept).
Structured output: ``response_format`` with the JSON schema where the provider takes one, else
``json_object``, else plain text (or ``llm.<role>.structured``); a server that refuses a mode is stepped down
to the next one (:class:`~rubricforge.llm.backends.StructuredModes`). litellm's
own retries are off: the client retries transient errors with its backoff.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

from rubricforge.config import RoleConfig
from rubricforge.errors import UserError
from rubricforge.llm.backends import StructuredModes, response_format, role_api_key
from rubricforge.llm.errors import RequestFailed, TransientError
from rubricforge.llm.request import STAGE_HEADER, Completion, Request
_NO_KEY_NEEDED = "no-key"  # sent to a self-hosted server when no key is configured (the SDK insists on one)


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled price table; no network
    import litellm

    litellm.suppress_debug_info = True
    quiet_litellm_logs()
    return litellm


def quiet_litellm_logs() -> None:
    """litellm's loggers go where the application's logs go (under ``rubricforge build``: the run's log
    file), not straight to the terminal: its own async logging worker, which we do not use, logs
    tracebacks when calls come from more than one event loop (one per Prefect task)."""
    import logging

    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                logger.removeHandler(handler)
        logger.propagate = True


def _retry_after(exc: Exception) -> float | None:
    """The server's ``Retry-After`` in seconds: litellm keeps the headers in ``litellm_response_headers``
    (the SDK's ``response.headers`` as a fallback)."""
    for headers in (getattr(exc, "litellm_response_headers", None), getattr(getattr(exc, "response", None),
                                                                            "headers", None)):
        try:
            value = {str(k).lower(): v for k, v in dict(headers).items()}.get("retry-after")  # type: ignore[arg-type]
            if value is not None:
                return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return None


def answer_text(resp: Any) -> str:
    """The first choice's message content; a response without one is a transient error (a faulty or
    overloaded server), retried like a 5xx."""
    choices = getattr(resp, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    if message is None:
        raise TransientError("the provider's response has no choices or no message")
    return getattr(message, "content", None) or ""


class LiteLLMBackend:
    name = "litellm"

    def __init__(self) -> None:
        self.litellm = _litellm()
        self.modes = StructuredModes()

    # ------------------------------------------------------------------ configuration checks

    async def prepare(self, role: str, role_cfg: RoleConfig) -> None:
        ll = self.litellm
        try:
            _, provider, _, _ = ll.get_llm_provider(model=role_cfg.model, api_base=role_cfg.api_base)
        except Exception:
            raise UserError(f"llm.{role}.model '{role_cfg.model}' names no provider litellm knows",
                            "write provider/model, e.g. openai/gpt-4o-mini, hosted_vllm/<model> with api_base, "
                            "or openai/<alias> with api_base for an OpenAI-compatible server") from None
        if role_cfg.api_key_env:
            role_api_key(role, role_cfg)
        elif not role_cfg.api_base:
            missing = ll.validate_environment(model=role_cfg.model)["missing_keys"]
            if missing:
                raise UserError(f"model {role_cfg.model} (llm.{role}) needs {', '.join(missing)} in the environment",
                                f"export {missing[0]}=..., or name the variable that holds the key with "
                                f"--set llm.{role}.api_key_env=NAME")
        self.modes.start(role_cfg, self._best_mode(role_cfg, provider))

    def _best_mode(self, role_cfg: RoleConfig, provider: str) -> str:
        ll = self.litellm
        # self-hosted OpenAI-compatible servers (vLLM, llama.cpp, SGLang) take json_schema even though
        # litellm's table cannot know them; a server that refuses steps down (see complete()).
        if role_cfg.api_base or ll.supports_response_schema(model=role_cfg.model, custom_llm_provider=provider):
            return "json_schema"
        try:
            params = ll.get_supported_openai_params(model=role_cfg.model, custom_llm_provider=provider) or []
        except Exception:
            params = []
        return "json_object" if "response_format" in params else "plain"

    # ------------------------------------------------------------------ requests

    def _kwargs(self, request: Request, role_cfg: RoleConfig, mode: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": request.model, "messages": request.messages,
                                  "temperature": request.temperature, "max_tokens": request.max_tokens,
                                  "timeout": role_cfg.timeout_s, "num_retries": 0, "max_retries": 0,
                                  "drop_params": True, "extra_headers": {STAGE_HEADER: request.stage}}
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.reasoning_effort is not None:
            kwargs["reasoning_effort"] = request.reasoning_effort
        if request.api_base:
            kwargs["api_base"] = request.api_base
        key = role_api_key(request.role, role_cfg)
        if key is None and request.api_base and not self.litellm.validate_environment(model=request.model)[
                "keys_in_environment"]:
            key = _NO_KEY_NEEDED
        if key is not None:
            kwargs["api_key"] = key
        if (fmt := response_format(request, mode)) is not None:
            kwargs["response_format"] = fmt
        return kwargs

    async def complete(self, request: Request, role_cfg: RoleConfig) -> Completion:
        while True:
            mode = self.modes.mode(request, role_cfg)
            try:
                resp = await self.litellm.acompletion(**self._kwargs(request, role_cfg, mode))
                break
            except Exception as exc:
                if not self.modes.step_down(request, role_cfg, mode, str(exc)):  # a refusal of the mode, any status
                    self._raise(request, role_cfg, exc)
        text = answer_text(resp)
        usage = getattr(resp, "usage", None)
        cost, known = self._cost(resp)
        return Completion(text=text, prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                          completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                          cost_usd=cost, cost_known=known)

    def _raise(self, request: Request, role_cfg: RoleConfig, exc: Exception) -> NoReturn:
        """The error litellm raised, as the client's kind: transient, a configuration mistake, or a failed request."""
        ll = self.litellm
        if isinstance(exc, (ll.Timeout, ll.RateLimitError, ll.APIConnectionError, ll.InternalServerError,
                            ll.ServiceUnavailableError, ll.BadGatewayError)):
            raise TransientError(f"{type(exc).__name__}: {exc}", _retry_after(exc)) from None
        if isinstance(exc, (ll.AuthenticationError, ll.PermissionDeniedError)):
            raise UserError(f"{request.model} (llm.{request.role}) refused the API key ({type(exc).__name__})",
                            f"check the key in {role_cfg.api_key_env or 'the provider environment variable'}") from None
        if isinstance(exc, ll.NotFoundError):
            raise UserError(f"model {request.model} (llm.{request.role}) was not found by the provider"
                            + (f" at {request.api_base}" if request.api_base else ""),
                            f"check llm.{request.role}.model (and api_base)") from None
        if isinstance(exc, ll.BadRequestError):
            raise RequestFailed(f"{type(exc).__name__}: {exc}") from None
        if isinstance(exc, ll.APIError) and (getattr(exc, "status_code", 0) or 0) < 500:
            raise RequestFailed(f"{type(exc).__name__}: {exc}") from None
        # a 5xx APIError, anything else (a garbled body, ...): retried, then this item fails, not the run
        raise TransientError(f"{type(exc).__name__}: {exc}") from None

    def _cost(self, resp: Any) -> tuple[float, bool]:
        try:
            return float(self.litellm.completion_cost(completion_response=resp) or 0.0), True
        except Exception:  # the model is not in litellm's price table
            return 0.0, False
