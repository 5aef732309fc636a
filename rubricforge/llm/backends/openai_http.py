"""Direct client for OpenAI-compatible chat servers: ``openai/<name>`` or ``hosted_vllm/<name>`` with an
``api_base`` (vLLM, llama.cpp's server, SGLang, a gateway). One ``POST <api_base>/chat/completions`` per
request over one keep-alive ``aiohttp`` session per event loop (closed when ``asyncio.run`` ends that loop),
without litellm's per-call machinery (parameter mapping, logging objects, callbacks, cost calculation),
which cost about 14 ms of CPU per call, nor httpx's (anyio, h11, a connection pool that checks every
connection on every request), which cost about 3 ms at 64 requests in flight. Proxy variables
(``HTTPS_PROXY``, ``NO_PROXY``) apply as with litellm.

Same contract as the litellm backend: the model name after the prefix is sent; the key comes from the
variable named by ``api_key_env`` at each request (else ``OPENAI_API_KEY`` / ``HOSTED_VLLM_API_KEY`` if
set, else no key); structured output starts at ``json_schema`` (or ``llm.<role>.structured``) and steps
down when the server refuses it (:class:`~rubricforge.llm.backends.StructuredModes`); 408 / 429 / 5xx,
timeouts, dropped connections, unreadable bodies and answers without a message are transient
(``Retry-After`` honoured), 401 / 403 / 404 are configuration mistakes, other 4xx fail the request. Cost
comes from litellm's bundled price table when the model is in it (read once per model).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from rubricforge.config import RoleConfig
from rubricforge.errors import UserError
from rubricforge.llm.backends import DIRECT_PREFIXES, StructuredModes, response_format, role_api_key
from rubricforge.llm.errors import RequestFailed, TransientError
from rubricforge.llm.request import STAGE_HEADER, Completion, Request

ENV_KEYS = {"openai/": "OPENAI_API_KEY", "hosted_vllm/": "HOSTED_VLLM_API_KEY"}
TRANSIENT_STATUS = {408, 409, 425, 429}  # and every 5xx

if TYPE_CHECKING:
    import aiohttp


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


def _retry_after(headers: Any) -> float | None:
    try:
        return max(0.0, float(headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def _error_text(status: int, body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        err = json.loads(text).get("error")
        message = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {message or text[:500]}"


class OpenAIHTTPBackend:
    name = "openai-http"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.modes = StructuredModes()
        self._sessions: dict[asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, AsyncGenerator[None, None]]] = {}

    async def prepare(self, role: str, role_cfg: RoleConfig) -> None:
        role_api_key(role, role_cfg)  # a named variable that is not set: one line now
        if role_cfg.model.startswith("openai/"):
            await asyncio.to_thread(_prices, split_model(role_cfg.model)[1])  # reads the price table off the loop
        self.modes.start(role_cfg, "json_schema")

    async def _session(self) -> aiohttp.ClientSession:
        """The running loop's session, made on first use. It is closed when the loop shuts down its async
        generators (``asyncio.run`` does before closing the loop): a suspended generator of the loop closes it."""
        import aiohttp

        loop = asyncio.get_running_loop()
        with self._lock:
            for old in [other for other in self._sessions if other.is_closed()]:
                self._sessions.pop(old)[0].detach()  # a loop closed without that shutdown: nothing left to close
            if loop in self._sessions:
                return self._sessions[loop][0]
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
            closer = _close_at_shutdown(session)
            self._sessions[loop] = (session, closer)
        await anext(closer)  # the loop now tracks it (a weak reference: kept above)
        return session

    def _headers(self, request: Request, role_cfg: RoleConfig) -> dict[str, str]:
        key = role_api_key(request.role, role_cfg)
        if key is None:
            key = os.environ.get(ENV_KEYS[split_model(request.model)[0]])
        return {STAGE_HEADER: request.stage, **({"Authorization": f"Bearer {key}"} if key else {})}

    def _body(self, request: Request, mode: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": split_model(request.model)[1], "messages": request.messages,
                                "temperature": request.temperature, "max_tokens": request.max_tokens}
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.seed is not None:
            body["seed"] = request.seed
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        if (fmt := response_format(request, mode)) is not None:
            body["response_format"] = fmt
        return body

    async def complete(self, request: Request, role_cfg: RoleConfig) -> Completion:
        url = (request.api_base or "").rstrip("/") + "/chat/completions"
        headers = self._headers(request, role_cfg)
        while True:
            mode = self.modes.mode(request, role_cfg)
            try:
                async with (await self._session()).post(url, json=self._body(request, mode), headers=headers,
                                                timeout=_timeout(role_cfg.timeout_s), proxy=_proxy(url)) as resp:
                    status, body = resp.status, await resp.read()
            except TimeoutError as exc:
                raise TransientError(f"timeout after {role_cfg.timeout_s:g} s ({type(exc).__name__})") from None
            except _client_error() as exc:  # connection refused or dropped, protocol errors, a cut-off body
                raise TransientError(f"{type(exc).__name__}: {exc}") from None
            if status == 200:
                return self._completion(request, body)
            text = _error_text(status, body)
            if self.modes.step_down(request, role_cfg, mode, text):
                continue
            if status in TRANSIENT_STATUS or status >= 500:
                raise TransientError(text, _retry_after(resp.headers))
            if status in (401, 403):
                raise UserError(f"{request.model} (llm.{request.role}) at {request.api_base} refused the API key "
                                f"(HTTP {status})", f"check the key in {role_cfg.api_key_env or 'llm.<role>.api_key_env'}")
            if status == 404:
                raise UserError(f"model {request.model} (llm.{request.role}) was not found at {request.api_base} "
                                f"(HTTP 404)", f"check llm.{request.role}.model and api_base")
            raise RequestFailed(text)

    @staticmethod
    def _completion(request: Request, body: bytes) -> Completion:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise TransientError(f"the server's answer is not JSON: {body[:200].decode('utf-8', 'replace')!r}") from None
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
        """Close the current event loop's session."""
        with self._lock:
            entry = self._sessions.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[1].aclose()  # its finally closes the session


async def _close_at_shutdown(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await session.close()


@functools.lru_cache(maxsize=64)
def _proxy(url: str) -> str | None:
    """The proxy for ``url`` from ``HTTP(S)_PROXY`` / ``NO_PROXY``, looked up once per URL (aiohttp's
    ``trust_env`` looks it up in a thread on every request)."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    return None if proxy_bypass(parts.hostname or "") else getproxies().get(parts.scheme)


@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    import aiohttp

    return aiohttp.ClientTimeout(total=seconds)


@functools.cache
def _client_error() -> type[Exception]:
    import aiohttp

    return aiohttp.ClientError
