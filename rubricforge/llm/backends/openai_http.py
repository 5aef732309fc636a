"""Direct client for OpenAI-compatible chat servers: ``openai/<name>`` or ``hosted_vllm/<name>`` with an
``api_base`` (vLLM, llama.cpp's server, SGLang, a gateway). One ``POST <api_base>/chat/completions`` per
request over pooled ``httpx.AsyncClient`` s (per event loop: a pool cannot cross loops; each pool serves at
most :data:`POOL_REQUESTS` requests at once, as httpcore's pool does work quadratic in its connections on
every request, about 10 ms of CPU per request at 256 in flight), without
litellm's per-call machinery (parameter mapping, logging objects, callbacks, cost calculation), which
cost about 14 ms of CPU per call.

Same contract as the litellm backend: the model name after the prefix is sent; the key comes from the
variable named by ``api_key_env`` at each request (else ``OPENAI_API_KEY`` / ``HOSTED_VLLM_API_KEY`` if
set, else no key); structured output starts at ``json_schema`` and steps down when the server refuses
it; 408 / 429 / 5xx, timeouts, dropped connections, unreadable bodies and answers without a message are
transient (``Retry-After`` honoured), 401 / 403 / 404 are configuration mistakes, other 4xx fail the
request. Cost comes from litellm's bundled price table when the model is in it (read once per model).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx

from rubricforge.config import RoleConfig
from rubricforge.errors import UserError
from rubricforge.llm.backends import DIRECT_PREFIXES, next_mode, response_format, role_api_key
from rubricforge.llm.errors import RequestFailed, TransientError
from rubricforge.llm.request import Completion, Request

ENV_KEYS = {"openai/": "OPENAI_API_KEY", "hosted_vllm/": "HOSTED_VLLM_API_KEY"}
TRANSIENT_STATUS = {408, 409, 425, 429}  # and every 5xx
POOL_REQUESTS = 16  # requests in flight per connection pool


def split_model(model: str) -> tuple[str, str]:
    """``("openai/", "name")`` from ``"openai/name"``."""
    prefix = next(p for p in DIRECT_PREFIXES if model.startswith(p))
    return prefix, model[len(prefix):]


@functools.lru_cache(maxsize=None)
def _prices(name: str) -> tuple[float, float] | None:
    """(input, output) USD per token from litellm's bundled table, or None when the model is not in it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from rubricforge.llm.backends.litellm_backend import _litellm

    entry = _litellm().model_cost.get(name)
    if not entry or "input_cost_per_token" not in entry:
        return None
    return float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token", 0.0))


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        return max(0.0, float(resp.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def _error_text(resp: httpx.Response) -> str:
    try:
        err = resp.json().get("error")
        message = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {resp.status_code}: {message or resp.text[:500]}"


class OpenAIHTTPBackend:
    name = "openai-http"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modes: dict[tuple[str, str | None], str] = {}
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pools] = weakref.WeakKeyDictionary()

    async def prepare(self, role: str, role_cfg: RoleConfig) -> None:
        role_api_key(role, role_cfg)  # a named variable that is not set: one line now
        if role_cfg.model.startswith("openai/"):
            await asyncio.to_thread(_prices, split_model(role_cfg.model)[1])  # reads the price table off the loop
        with self._lock:
            self._modes.setdefault((role_cfg.model, role_cfg.api_base), "json_schema")

    def _pools(self) -> _Pools:
        loop = asyncio.get_running_loop()
        with self._lock:
            pools = self._clients.get(loop)
            if pools is None:
                pools = self._clients[loop] = _Pools()
            return pools

    def _headers(self, request: Request, role_cfg: RoleConfig) -> dict[str, str]:
        key = role_api_key(request.role, role_cfg)
        if key is None:
            key = os.environ.get(ENV_KEYS[split_model(request.model)[0]])
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _body(self, request: Request, mode: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": split_model(request.model)[1], "messages": request.messages,
                                "temperature": request.temperature, "max_tokens": request.max_tokens}
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.seed is not None:
            body["seed"] = request.seed
        if (fmt := response_format(request, mode)) is not None:
            body["response_format"] = fmt
        return body

    async def complete(self, request: Request, role_cfg: RoleConfig) -> Completion:
        slot = (request.model, request.api_base)
        url = (request.api_base or "").rstrip("/") + "/chat/completions"
        headers = self._headers(request, role_cfg)
        while True:
            mode = self._modes.get(slot, "json_schema")
            try:
                async with self._pools().client() as http:
                    resp = await http.post(url, json=self._body(request, mode), headers=headers,
                                           timeout=role_cfg.timeout_s)
            except httpx.TimeoutException as exc:
                raise TransientError(f"timeout after {role_cfg.timeout_s:g} s ({type(exc).__name__})") from None
            except httpx.HTTPError as exc:  # connection refused or dropped, protocol errors
                raise TransientError(f"{type(exc).__name__}: {exc}") from None
            status = resp.status_code
            if status == 200:
                return self._completion(request, resp)
            text = _error_text(resp)
            if status in TRANSIENT_STATUS or status >= 500:
                raise TransientError(text, _retry_after(resp))
            if status in (401, 403):
                raise UserError(f"{request.model} (llm.{request.role}) at {request.api_base} refused the API key "
                                f"(HTTP {status})", f"check the key in {role_cfg.api_key_env or 'llm.<role>.api_key_env'}")
            if status == 404:
                raise UserError(f"model {request.model} (llm.{request.role}) was not found at {request.api_base} "
                                f"(HTTP 404)", f"check llm.{request.role}.model and api_base")
            if status == 400 and (lower := next_mode(request, mode, text)) is not None:
                with self._lock:
                    self._modes[slot] = lower
                continue
            raise RequestFailed(text)

    @staticmethod
    def _completion(request: Request, resp: httpx.Response) -> Completion:
        try:
            data = resp.json()
        except (ValueError, UnicodeDecodeError):
            raise TransientError(f"the server's answer is not JSON: {resp.text[:200]!r}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise TransientError("the provider's response has no choices or no message")
        usage = data.get("usage") or {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        prices = _prices(split_model(request.model)[1]) if request.model.startswith("openai/") else None
        cost = prompt * prices[0] + completion * prices[1] if prices else 0.0
        return Completion(text=message.get("content") or "", prompt_tokens=prompt, completion_tokens=completion,
                          cost_usd=cost, cost_known=prices is not None)

    async def aclose(self) -> None:
        """Close the current event loop's connection pools."""
        with self._lock:
            pools = self._clients.pop(asyncio.get_running_loop(), None)
        for client in pools.clients if pools is not None else []:
            await client.aclose()


class _Pools:
    """One event loop's connection pools; a request takes the least busy one, a new one when all are full."""

    def __init__(self) -> None:
        self.clients: list[httpx.AsyncClient] = []
        self.busy: list[int] = []

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        i = min(range(len(self.busy)), key=self.busy.__getitem__, default=-1)
        if i < 0 or self.busy[i] >= POOL_REQUESTS:
            self.clients.append(httpx.AsyncClient(limits=httpx.Limits(max_connections=None,
                                                                      max_keepalive_connections=POOL_REQUESTS)))
            self.busy.append(0)
            i = len(self.clients) - 1
        self.busy[i] += 1
        try:
            yield self.clients[i]
        finally:
            self.busy[i] -= 1
