"""The one LLM client every stage uses.

``generate`` resolves the role, looks the request up in the cache, sends it through the role's backend
within the role's concurrency limit and the model's rate limits (retrying timeouts, 429 and 5xx with exponential backoff
and jitter), validates structured output and re-prompts with the validation error, and books tokens and
cost in the ledger. The budget (``llm.max_tokens``, ``llm.max_cost_usd``) is a ceiling: each request reserves its
bound in the ledger, inside its concurrency slot and before it is sent, and waits while the spend plus the
reservations in flight reach the cap (:meth:`~rubricforge.llm.ledger.Ledger.reserve`). A request that still fails
returns ``ok=False`` with the error and the raw text (``transient=True`` when the provider never answered: the
work that needed it is not finished, see :func:`transient_failures`); only configuration mistakes (UserError) and
an exhausted budget (BudgetExceeded) raise. Answers are cleaned of lone surrogates and error text of secrets
(:mod:`.hygiene`) before anything stores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from rubricforge.config import LLMConfig, RoleConfig
from rubricforge.llm import structured
from rubricforge.llm.backends import Backend, backend_kind, make_backend
from rubricforge.llm.cache import ResponseCache
from rubricforge.llm.errors import GaveUp, RequestFailed, TransientError, Unavailable
from rubricforge.llm.hygiene import clean_text, scrub, secret_values
from rubricforge.llm.ledger import Ledger
from rubricforge.llm.limits import LimitRegistry
from rubricforge.llm.pricing import CHARS_PER_TOKEN, price
from rubricforge.llm.recording import Recorder
from rubricforge.llm.request import Completion, Request, build_request

MAX_BACKOFF_S = 60.0


@dataclass
class LLMResult:
    ok: bool
    value: Any = None  # the validated pydantic object (None for plain-text calls and failures)
    text: str = ""  # the raw answer (the last one when every attempt failed)
    error: str | None = None
    cached: bool = False
    usage: dict[str, float] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0,
                                                             "cost_usd": 0.0})
    attempts: int = 0  # answers fetched from the backend for this call (0 on a cache hit)
    model: str = ""
    transient: bool = False  # failed because the provider did not answer after the retries (timeout, 429, 5xx, ...)


class TransientFailures:
    """The errors of the calls that failed transiently inside one :func:`transient_failures` block."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def check(self, item: str) -> None:
        """Raise :class:`Unavailable` naming ``item`` when a call failed transiently: it is not finished."""
        if self.errors:
            raise Unavailable(f"{item}: {len(self.errors)} LLM call(s) failed after their retries "
                              f"(last: {' '.join(self.errors[-1].split())[:200]})")


_WATCH: ContextVar[TransientFailures | None] = ContextVar("rubricforge_transient_failures", default=None)


@contextlib.contextmanager
def transient_failures() -> Iterator[TransientFailures]:
    """Collect the transiently failed calls made inside the block (also by the asyncio tasks it starts), so a
    stage can refuse to log an item as finished: ``with transient_failures() as f: ...; f.check(item_id)``."""
    watch = TransientFailures()
    token = _WATCH.set(watch)
    try:
        yield watch
    finally:
        _WATCH.reset(token)


RESAMPLE_TEMPERATURE = 0.3  # a resample of a role set to temperature 0 (greedy decoding repeats itself)
_RESAMPLE: ContextVar[int] = ContextVar("rubricforge_resample", default=0)


@contextlib.contextmanager
def resampled(n: int) -> Iterator[None]:
    """Inside the block a request the cache cannot answer is sent with its seed shifted by ``n`` (and at
    :data:`RESAMPLE_TEMPERATURE` when its temperature is 0), so a rebuild does not repeat an invalid answer;
    a valid answer is cached under the original request's key. ``n`` = 0: requests as configured."""
    token = _RESAMPLE.set(n)
    try:
        yield
    finally:
        _RESAMPLE.reset(token)


def _resample(request: Request) -> Request:
    n = _RESAMPLE.get()
    if not n:
        return request
    return replace(request, seed=(request.seed or 0) + n, temperature=request.temperature or RESAMPLE_TEMPERATURE)


Check = Callable[[Any], "str | None"]  # a caller's test of a valid answer: None when usable, else why not


def _check(text: str, output: type[BaseModel] | None, check: Check | None = None) -> tuple[Any, str | None]:
    if output is None:
        return None, (None if text.strip() else "the model returned an empty answer")
    value, error = structured.parse(text, output)
    if error is None and check is not None and (error := check(value)) is not None:
        value = None
    return value, error


def _smallest_rates(roles: list[RoleConfig], model: str, api_base: str | None) -> tuple[int | None, int | None]:
    """The rpm and tpm of a model and server: the smallest set by any role that uses them (None: no limit)."""
    same = [r for r in roles if (r.model, r.api_base) == (model, api_base)]
    return (min((r.rpm for r in same if r.rpm), default=None), min((r.tpm for r in same if r.tpm), default=None))


def _estimate_tokens(request: Request) -> int:
    """A request's bound in tokens: its prompt estimated from characters, plus its ``max_tokens``."""
    return len(json.dumps(request.messages, ensure_ascii=False)) // CHARS_PER_TOKEN + request.max_tokens


RESERVE_POLL_S = 0.01  # how often a request held back by the budget looks again (the first wait; doubles to 0.1 s)


class LLMClient:
    def __init__(self, cfg: LLMConfig, limits: LimitRegistry | None = None):
        """``limits``: the concurrency and rate limits to respect (default: this client's own, in-process)."""
        self.cfg = cfg
        self.ledger = Ledger(cfg.max_cost_usd, cfg.max_tokens)
        self.cache = ResponseCache(cfg.cache_path) if cfg.cache_path else None
        self.recorder = Recorder(cfg.record_path) if cfg.record_path else None
        self._limits = limits or LimitRegistry()
        self._lock = threading.Lock()
        self._backends: dict[str, Backend] = {}
        self._prepared: set[str] = set()
        roles = [cfg.role(r) for r in ("generator", "verifier", "judge")]
        self._secrets = secret_values(r.api_key_env for r in roles)
        self._rates = {(r.model, r.api_base): _smallest_rates(roles, r.model, r.api_base) for r in roles}

    def model_name(self, role: str) -> str:
        return self.cfg.role(role).model

    def request(self, role: str, messages: list[dict[str, Any]], output: type[BaseModel] | None = None,
                stage: str = "default", temperature: float | None = None, max_tokens: int | None = None,
                seed: int | None = None) -> Request:
        """The request ``generate`` would send first (its ``key()`` is the cache and replay key)."""
        return build_request(role, self.cfg.role(role), messages, output, stage, temperature, max_tokens, seed)

    async def _backend(self, role: str, role_cfg: RoleConfig) -> Backend:
        kind = backend_kind(role_cfg)
        with self._lock:
            backend = self._backends.get(kind)
            if backend is None:
                backend = self._backends[kind] = make_backend(kind, self.cfg)
            ready = role in self._prepared
        if not ready:
            await backend.prepare(role, role_cfg)
            with self._lock:
                self._prepared.add(role)
        return backend

    async def generate(self, role: str, messages: list[dict[str, Any]], output: type[BaseModel] | None = None,
                       stage: str = "default", temperature: float | None = None,
                       max_tokens: int | None = None, seed: int | None = None,
                       check: Check | None = None) -> LLMResult:
        """``seed`` overrides the role's seed for this call (independent samples of one prompt, e.g. votes).
        ``check(value)``: what the schema cannot say (e.g. a judge's answer covers every criterion asked); an
        answer it refuses is invalid like one that breaks the schema: re-prompted with its reason (up to
        ``structured_retries`` times), never cached, and a cached one it refuses is asked for again."""
        role_cfg = self.cfg.role(role)
        backend = await self._backend(role, role_cfg)
        first = build_request(role, role_cfg, messages, output, stage, temperature, max_tokens, seed)
        cache = self.cache if backend.name != "replay" else None  # replay answers from its recording only
        if cache is not None and (hit := cache.get(first)) is not None:
            value, error = _check(hit.text, output, check)
            if error is None:
                if self.recorder:
                    self.recorder.append(first, hit)
                self.ledger.call(role, stage, cached=True, failed=False)
                return LLMResult(ok=True, value=value, text=hit.text, cached=True, model=first.model)

        result = LLMResult(ok=False, model=first.model)
        sent = request = _resample(first)
        for _ in range(role_cfg.structured_retries + 1 if output is not None else 1):
            try:
                completion = await self._fetch(backend, role_cfg, request)
            except RequestFailed as exc:
                result.error, result.transient = self._scrub(str(exc)), isinstance(exc, GaveUp)
                break
            result.attempts += 1
            for k, v in (("prompt_tokens", completion.prompt_tokens),
                         ("completion_tokens", completion.completion_tokens), ("cost_usd", completion.cost_usd)):
                result.usage[k] += v
            result.text = completion.text
            result.value, result.error = _check(completion.text, output, check)
            if result.error is None:
                result.ok = True
                if cache is not None:
                    cache.put(first, completion)  # under the first request's key: a re-run hits at once
                break
            if output is not None:
                request = replace(sent, messages=sent.messages + structured.reprompt(
                    completion.text, result.error, output))
        if not result.ok and result.attempts:
            result.error = f"no valid answer after {result.attempts} attempt(s): {result.error}"
        if result.transient and (watch := _WATCH.get()) is not None:
            watch.errors.append(result.error or "")
        self.ledger.call(role, stage, cached=False, failed=not result.ok)
        return result

    def _scrub(self, text: str) -> str:
        return scrub(clean_text(text), self._secrets)

    async def _fetch(self, backend: Backend, role_cfg: RoleConfig, request: Request) -> Completion:
        """One answer from the backend, retrying transient errors with exponential backoff and jitter."""
        rpm, tpm = self._rates[(request.model, request.api_base)]
        limits = self._limits.get(request.role, request.model, request.api_base, role_cfg.concurrency, rpm, tpm)
        estimate = _estimate_tokens(request)
        bound_usd = self._bound_usd(role_cfg, request, estimate)
        for attempt in range(role_cfg.max_retries + 1):
            self.ledger.check_budget()
            async with limits.slots.hold():
                await limits.admit(estimate)
                await self._reserve(estimate, bound_usd)
                try:
                    completion = await backend.complete(request, role_cfg)
                except TransientError as exc:
                    limits.settle(estimate, 0)
                    error = exc
                else:
                    completion.text = clean_text(scrub(completion.text, self._secrets, shapes=False))
                    limits.settle(estimate, completion.prompt_tokens + completion.completion_tokens)
                    self.ledger.request(request.role, request.stage, completion.prompt_tokens,
                                        completion.completion_tokens, completion.cost_usd, completion.cost_known)
                    if self.recorder:
                        self.recorder.append(request, completion)
                    return completion
                finally:
                    self.ledger.release(estimate, bound_usd)
            if attempt < role_cfg.max_retries:
                pause = min(MAX_BACKOFF_S, role_cfg.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)
                await asyncio.sleep(max(pause, min(error.retry_after or 0.0, MAX_BACKOFF_S)))
        raise GaveUp(f"{error} (gave up after {role_cfg.max_retries + 1} attempts)")

    def _bound_usd(self, role_cfg: RoleConfig, request: Request, tokens: int) -> float:
        """The most a request can cost (its bound in tokens at the model's prices; 0 for an unpriced model)."""
        if self.ledger.max_cost_usd is None or (prices := price(role_cfg)) is None:
            return 0.0
        return (tokens - request.max_tokens) * prices[0] + request.max_tokens * prices[1]

    async def _reserve(self, tokens: int, usd: float) -> None:
        """Book the request's bound in the ledger, waiting while the requests in flight hold the rest of the
        budget (BudgetExceeded once it is spent)."""
        pause = RESERVE_POLL_S
        while not self.ledger.reserve(tokens, usd):
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)

    async def aclose(self) -> None:
        for backend in list(self._backends.values()):
            if (close := getattr(backend, "aclose", None)) is not None:
                await close()
        if self.cache is not None:
            self.cache.close()
