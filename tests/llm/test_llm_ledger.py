"""Ledger numbers per role and stage, the budget cap (a ceiling, also over queued concurrent calls), and
configuration errors (missing key, unknown model); the API key comes from the environment and is never written anywhere."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from rubricforge.config import LLMConfig
from rubricforge.errors import BudgetExceeded, UserError
from rubricforge.llm import LLMClient
from rubricforge.llm.client import _estimate_tokens
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config

MSG = [{"role": "user", "content": "What is the capital of France?"}]


class Capital(BaseModel):
    capital: str


def _msg(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {i}"}]


def test_ledger_books_calls_tokens_hits_and_failures_per_role_and_stage(tmp_path):
    script = [Reply(prompt_tokens=10, completion_tokens=5), Reply(prompt_tokens=20, completion_tokens=8),
              Reply("nope", prompt_tokens=30, completion_tokens=1)]
    with FakeOpenAI(script) as server:
        client = LLMClient(LLMConfig.model_validate(litellm_llm_config(tmp_path, server, structured_retries=1)))

        async def run():
            await client.generate("generator", _msg(1), output=Capital, stage="extract")
            await client.generate("generator", _msg(1), output=Capital, stage="extract")  # cache hit
            await client.generate("generator", _msg(2), output=Capital, stage="merge")
            await client.generate("judge", _msg(3), output=Capital, stage="score")  # 2 bad answers

        asyncio.run(run())
    s = client.ledger.summary()
    gen, judge = s["by_role"]["generator"], s["by_role"]["judge"]
    assert (gen["calls"], gen["requests"], gen["cache_hits"], gen["failures"]) == (3, 2, 1, 0)
    assert (gen["prompt_tokens"], gen["completion_tokens"]) == (30, 13)
    assert (judge["calls"], judge["requests"], judge["failures"], judge["prompt_tokens"]) == (1, 2, 1, 60)
    assert s["by_stage"]["extract"]["cache_hits"] == 1 and s["by_stage"]["merge"]["prompt_tokens"] == 20
    assert s["total"] == {"calls": 4, "requests": 4, "prompt_tokens": 90, "completion_tokens": 15,
                          "cost_usd": 0.0, "cache_hits": 1, "failures": 1, "unpriced_requests": 4}


def test_cost_comes_from_the_price_table_and_the_cost_cap_stops_the_next_call(tmp_path):
    with FakeOpenAI([Reply(prompt_tokens=1000, completion_tokens=1000)]) as server:
        cfg = LLMConfig.model_validate({**litellm_llm_config(tmp_path, server, model="openai/gpt-4o-mini"),
                                        "max_cost_usd": 1e-6})
        client = LLMClient(cfg)
        first = asyncio.run(client.generate("generator", _msg(1), output=Capital, stage="s"))
        assert first.ok and first.usage["cost_usd"] > 1e-6
        with pytest.raises(BudgetExceeded) as err:
            asyncio.run(client.generate("generator", _msg(2), output=Capital, stage="s"))
        assert len(server.requests) == 1
    text = str(err.value)
    assert "llm.max_cost_usd" in text and "re-run" in text and "kept" in text and isinstance(err.value, UserError)
    assert client.ledger.summary()["total"]["unpriced_requests"] == 0


def test_token_cap_stops_cleanly(tmp_path):
    with FakeOpenAI([Reply(prompt_tokens=40, completion_tokens=20)]) as server:
        client = LLMClient(LLMConfig.model_validate({**litellm_llm_config(tmp_path, server), "max_tokens": 100}))

        async def run():
            done = []
            for i in range(5):
                done.append(await client.generate("generator", _msg(i), output=Capital, stage="s"))
            return done

        with pytest.raises(BudgetExceeded, match="120 tokens of the 100 tokens cap"):
            asyncio.run(run())
        assert len(server.requests) == 2


def test_missing_api_key_is_a_user_error_before_any_request(tmp_path, monkeypatch):
    monkeypatch.delenv("RF_TEST_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI() as server:
        cfg = LLMConfig.model_validate(litellm_llm_config(tmp_path, server, api_key_env="RF_TEST_KEY"))
        with pytest.raises(UserError, match="RF_TEST_KEY") as err:
            asyncio.run(LLMClient(cfg).generate("judge", MSG, output=Capital, stage="s"))
        assert "export RF_TEST_KEY" in str(err.value) and server.requests == []
    hosted = LLMConfig.model_validate({"judge": {"backend": "litellm", "model": "gpt-4o-mini"}, "cache_path": ""})
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        asyncio.run(LLMClient(hosted).generate("judge", MSG, output=Capital, stage="s"))


def test_unknown_model_is_a_user_error(tmp_path):
    cfg = LLMConfig.model_validate({"judge": {"backend": "litellm", "model": "no-such-model"}, "cache_path": ""})
    with pytest.raises(UserError, match="no-such-model"):
        asyncio.run(LLMClient(cfg).generate("judge", MSG, output=Capital, stage="s"))
    local = LLMConfig.model_validate({"judge": {"backend": "local", "model": "gpt-4o"}, "cache_path": ""})
    with pytest.raises(UserError, match="backend=litellm"):
        asyncio.run(LLMClient(local).generate("judge", MSG, output=Capital, stage="s"))


def test_api_key_is_read_from_the_environment_and_never_written(tmp_path, monkeypatch):
    secret = "sk-test-secret-4711"
    monkeypatch.setenv("RF_TEST_KEY", secret)
    rec = tmp_path / "rec.jsonl"
    with FakeOpenAI() as server:
        cfg = LLMConfig.model_validate({**litellm_llm_config(tmp_path, server, api_key_env="RF_TEST_KEY"),
                                        "record_path": str(rec)})
        client = LLMClient(cfg)
        assert asyncio.run(client.generate("judge", MSG, output=Capital, stage="s")).ok
        asyncio.run(client.aclose())
    assert server.headers[0]["authorization"] == f"Bearer {secret}"
    for path in [rec, *tmp_path.glob("llm-cache.sqlite*")]:
        assert secret.encode() not in path.read_bytes()
    assert secret not in repr(client.ledger.summary()) and secret not in cfg.model_dump_json()


@pytest.mark.parametrize("cap", [{"max_tokens": 300}, {"max_cost_usd": 300 * 0.6e-6}], ids=["tokens", "cost"])
def test_the_budget_is_a_ceiling_over_calls_queued_for_a_slot(tmp_path, cap):
    """40 judge calls queued behind 4 concurrency slots: once the cap is reached no queued call is sent, so the
    spend stays within the cap plus what the 4 calls in flight can spend (each reserved its bound: prompt estimate
    + max_tokens). The client that checked the budget before a call waited for its slot sent all 40 (2,400
    tokens). gpt-4o-mini's prices: $0.15 / $0.60 per million input / output tokens."""
    concurrency = 4
    with FakeOpenAI([Reply(prompt_tokens=10, completion_tokens=50, delay_s=0.02)]) as server:
        llm = litellm_llm_config(tmp_path, server, model="openai/gpt-4o-mini", concurrency=concurrency, max_tokens=60)
        client = LLMClient(LLMConfig.model_validate({**llm, **cap}))

        async def run():
            return await asyncio.gather(*(client.generate("judge", _msg(i), output=Capital, stage="s")
                                          for i in range(40)), return_exceptions=True)

        got = asyncio.run(run())
    total = client.ledger.summary()["total"]
    bound = max(_estimate_tokens(client.request("judge", _msg(i), Capital)) for i in range(40))
    prices = (0.15e-6, 0.6e-6)
    bound_usd = (bound - 60) * prices[0] + 60 * prices[1]
    assert sum(isinstance(g, BudgetExceeded) for g in got) > 0 and not any(
        isinstance(g, Exception) and not isinstance(g, BudgetExceeded) for g in got)
    assert server.n_requests == total["requests"] < 40
    if "max_tokens" in cap:
        assert total["prompt_tokens"] + total["completion_tokens"] <= cap["max_tokens"] + concurrency * bound
    else:
        assert total["cost_usd"] <= cap["max_cost_usd"] + concurrency * bound_usd
