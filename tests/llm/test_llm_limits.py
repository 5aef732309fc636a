"""Requests- and tokens-per-minute buckets, on a fake clock (no timing assertions), and `llm check`."""

from __future__ import annotations

import asyncio

import pytest

from rubricforge.config import Config, LLMConfig
from rubricforge.llm import limits
from rubricforge.llm.check import check_roles
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config


@pytest.fixture
def clock(monkeypatch):
    """Replace the limiter's clock and sleep: sleeping advances the clock and is logged."""
    state = {"now": 1000.0, "slept": []}

    async def fake_sleep(seconds: float) -> None:
        state["slept"].append(seconds)
        state["now"] += seconds

    monkeypatch.setattr(limits.time, "monotonic", lambda: state["now"])
    monkeypatch.setattr(limits.asyncio, "sleep", fake_sleep)
    return state


def test_requests_per_minute_bucket_bursts_then_spaces_requests(clock):
    bucket = limits.TokenBucket(per_minute=2)

    async def take(n: int) -> None:
        for _ in range(n):
            await bucket.take(1)

    asyncio.run(take(2))
    assert clock["slept"] == []  # a minute's worth may burst
    asyncio.run(take(2))
    assert sum(clock["slept"]) == pytest.approx(60.0)  # then one per 30 s


def test_tokens_per_minute_bucket_charges_the_real_use_after_the_estimate(clock):
    bucket = limits.TokenBucket(per_minute=600)  # 10 tokens/s
    asyncio.run(bucket.take(100))
    bucket.adjust(600)  # the request used 700, not 100: the bucket goes 100 into debt
    asyncio.run(bucket.take(50))
    assert sum(clock["slept"]) == pytest.approx(15.0)  # (100 debt + 50) / 10 per s
    bucket.adjust(-10_000)  # a refund never fills past the capacity
    assert bucket._level == bucket.capacity


def test_llm_check_reports_backend_model_and_a_structured_answer(tmp_path):
    with FakeOpenAI() as server:
        cfg = Config(llm=LLMConfig.model_validate(litellm_llm_config(tmp_path, server)))
        lines, failed = asyncio.run(check_roles(cfg, ["judge"]))
    assert len(lines) == 1 and failed == [] and len(server.requests) == 1
    assert lines[0].startswith(f"judge: backend=litellm model=openai/fake-model api_base={server.api_base}")
    assert 'ok {"capital": "Paris"}' in lines[0] and "11+7 tokens" in lines[0]
    assert not (tmp_path / "llm-cache.sqlite").exists()  # the check bypasses the cache
