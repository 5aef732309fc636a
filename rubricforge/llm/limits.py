"""Concurrency and rate limits per model that hold across event loops and threads.

One client may be driven from several event loops at once (e.g. worker threads each running
``asyncio.run``), so an ``asyncio.Semaphore`` (bound to one loop) will not do. These primitives keep
their state under a ``threading.Lock`` and wake waiters on their own loop with ``call_soon_threadsafe``.

A concurrency slot goes to the waiting request of lowest :data:`PRIORITY`, then first come first served.
The tree pipeline gives each tree its seed's position: with more trees in flight than slots, the trees
admitted first finish first, so finished work reaches the stage logs (and the verifier's slots) while the
later trees are still being built, instead of every tree advancing in step and reaching the end together.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import AsyncIterator, Callable

# the priority of the slot requests made in this context (and the tasks it starts): lower is served first
PRIORITY: ContextVar[int] = ContextVar("rubricforge_llm_priority", default=0)


class CrossLoopSemaphore:
    """A semaphore usable from any event loop in any thread; waiters are served by :data:`PRIORITY`, then
    in arrival order."""

    def __init__(self, value: int):
        self._value = value
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []  # a heap
        self._arrivals = itertools.count()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._value > 0 and not self._waiters:
                self._value -= 1
                return
            fut: asyncio.Future[None] = loop.create_future()
            heapq.heappush(self._waiters, (PRIORITY.get(), next(self._arrivals), loop, fut))
        try:
            await fut
        except asyncio.CancelledError:
            with self._lock:
                entry = next((w for w in self._waiters if w[3] is fut), None)
                if entry is not None:
                    self._waiters.remove(entry)
                    heapq.heapify(self._waiters)
            if entry is None and fut.done() and not fut.cancelled():
                self.release()  # the slot was granted just as we were cancelled: pass it on
            raise

    def release(self) -> None:
        here = asyncio._get_running_loop()
        with self._lock:
            while self._waiters:
                _, _, loop, fut = heapq.heappop(self._waiters)
                try:  # another loop's waiter: wake that loop (a self-pipe write); this loop's: just schedule it
                    (loop.call_soon if loop is here else loop.call_soon_threadsafe)(self._grant, fut)
                    return
                except RuntimeError:  # that loop is closed; try the next waiter
                    continue
            self._value += 1

    def _grant(self, fut: asyncio.Future[None]) -> None:
        if fut.cancelled():
            self.release()  # its waiter gave up after being chosen: the slot goes to the next one
        else:
            fut.set_result(None)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()


class TokenBucket:
    """``rate`` units per minute, bursting up to one minute's worth. ``take`` may run into debt (a request
    larger than the bucket, or a correction after the fact); later takers then wait for the debt to clear."""

    def __init__(self, per_minute: int):
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._level = self.capacity
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def take(self, amount: float) -> None:
        amount = min(amount, self.capacity)  # never wait for more than a full bucket
        while True:
            with self._lock:
                self._refill()
                if self._level >= amount:
                    self._level -= amount
                    return
                wait = (amount - self._level) / self.rate
            await asyncio.sleep(wait)

    def adjust(self, amount: float) -> None:
        """Charge (positive) or refund (negative) the difference between an estimate and the real use."""
        with self._lock:
            self._refill()
            self._level = min(self.capacity, self._level - amount)


class ModelLimits:
    """The concurrency slot and optional rpm / tpm buckets of one model."""

    def __init__(self, concurrency: int, rpm: int | None, tpm: int | None):
        self.slots = CrossLoopSemaphore(concurrency)
        self.requests = TokenBucket(rpm) if rpm else None
        self.tokens = TokenBucket(tpm) if tpm else None

    async def admit(self, estimated_tokens: int) -> None:
        """Wait for the rate limits (call inside a concurrency slot)."""
        if self.requests:
            await self.requests.take(1)
        if self.tokens:
            await self.tokens.take(estimated_tokens)

    def settle(self, estimated_tokens: int, used_tokens: int) -> None:
        if self.tokens:
            self.tokens.adjust(used_tokens - estimated_tokens)


class LimitRegistry:
    """One :class:`ModelLimits` per (role, model, api_base): each role's concurrency holds on its own, also when
    roles share a model and server. The rate buckets (rpm / tpm) are the model's, shared by the roles that use it
    (sized by the client: the smallest setting among them). Created on first use by
    ``factory(role, model, api_base, concurrency, rpm, tpm)`` (default: in-process limits; the Prefect flows pass
    one whose limits hold across every worker, :mod:`rubricforge.flows.limits`)."""

    def __init__(self, factory: Callable[[str, str, str | None, int, int | None, int | None], ModelLimits] | None
                 = None):
        self._factory = factory or (lambda role, model, api_base, concurrency, rpm, tpm: ModelLimits(concurrency, rpm,
                                                                                                      tpm))
        self._lock = threading.Lock()
        self._limits: dict[tuple[str, str, str | None], ModelLimits] = {}
        self._rates: dict[tuple[str, str | None], ModelLimits] = {}

    def get(self, role: str, model: str, api_base: str | None, concurrency: int, rpm: int | None,
            tpm: int | None) -> ModelLimits:
        with self._lock:
            key = (role, model, api_base)
            if key not in self._limits:
                limits = self._factory(role, model, api_base, concurrency, rpm, tpm)
                rates = self._rates.setdefault((model, api_base), limits)
                limits.requests, limits.tokens = rates.requests, rates.tokens
                self._limits[key] = limits
            return self._limits[key]
