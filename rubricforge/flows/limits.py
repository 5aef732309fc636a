"""LLM limits that hold across every worker of a flow run: Prefect global concurrency limits.

Each (model, api_base) gets a global concurrency limit ``rubricforge-llm-<model>-<hash>`` whose size
is the smallest ``concurrency`` of the roles that use it, and, with ``rpm``, a rate limit
(``...-rpm``, slots decaying at rpm/60 per second). A request holds a slot of the first while it is in
flight, wherever its task runs. ``tpm`` stays a per-process bucket.
"""

from __future__ import annotations

import hashlib
import re
from contextlib import asynccontextmanager
from typing import AsyncIterator

from rubricforge.config import Config
from rubricforge.llm.limits import LimitRegistry, ModelLimits

ROLES = ("generator", "verifier", "judge")


def limit_name(model: str, api_base: str | None) -> str:
    digest = hashlib.sha256(f"{model}|{api_base or ''}".encode()).hexdigest()[:8]
    return f"rubricforge-llm-{re.sub(r'[^A-Za-z0-9_.-]+', '-', model)[:60]}-{digest}"


def shared(cfg: Config) -> bool:
    """Whether this run's LLM limits go through Prefect (``runner.llm_limits``; auto: unless threads)."""
    mode = cfg.runner.llm_limits
    return mode == "prefect" or (mode == "auto" and cfg.runner.kind != "threads")


def ensure_limits(cfg: Config) -> list[str]:
    """Create or resize the global limits for every configured model; returns their names."""
    from prefect.client.orchestration import get_client

    sizes: dict[str, list[int]] = {}
    rpms: dict[str, list[int]] = {}
    for r in (cfg.llm.role(role) for role in ROLES):
        name = limit_name(r.model, r.api_base)
        sizes.setdefault(name, []).append(r.concurrency)
        if r.rpm:
            rpms.setdefault(name, []).append(r.rpm)
    with get_client(sync_client=True) as client:
        for name, size in sizes.items():
            client.upsert_global_concurrency_limit_by_name(name, min(size))
        for name, rpm in rpms.items():
            client.upsert_global_concurrency_limit_by_name(f"{name}-rpm", min(rpm), slot_decay_per_second=min(rpm) / 60)
    return sorted(sizes)


class _GlobalSlots:
    def __init__(self, name: str):
        self.name = name

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        from prefect.concurrency.asyncio import concurrency

        async with concurrency(self.name, occupy=1, strict=True):
            yield


class GlobalModelLimits(ModelLimits):
    """:class:`ModelLimits` whose concurrency (and rpm) are Prefect global limits."""

    def __init__(self, model: str, api_base: str | None, concurrency: int, rpm: int | None, tpm: int | None):
        super().__init__(concurrency, None, tpm)
        self.slots = _GlobalSlots(limit_name(model, api_base))  # type: ignore[assignment]
        self.rpm_limit = f"{self.slots.name}-rpm" if rpm else None

    async def admit(self, estimated_tokens: int) -> None:
        if self.rpm_limit:
            from prefect.concurrency.asyncio import rate_limit

            await rate_limit(self.rpm_limit, occupy=1, strict=True)
        await super().admit(estimated_tokens)


def registry(cfg: Config) -> LimitRegistry | None:
    """The limits a worker's LLM client should use (None: its own in-process limits)."""
    return LimitRegistry(GlobalModelLimits) if shared(cfg) else None
