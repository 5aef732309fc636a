"""The LLM client under a faulty provider: empty or malformed responses, answers that cannot be stored,
provider error text that echoes the API key, Retry-After, and per-role concurrency on a shared model."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricforge.config import LLMConfig
from rubricforge.llm import LLMClient
from rubricforge.llm.client import transient_failures
from rubricforge.llm.errors import Unavailable
from rubricforge.io.stagelog import StageLog
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import Capital, litellm_llm_config

MSG = [{"role": "user", "content": "What is the capital of France?"}]
KEY = "sk-live-0123456789abcdefSECRETxyz"


def _client(tmp_path, server: FakeOpenAI, cache: bool = False, **role) -> LLMClient:
    data = litellm_llm_config(tmp_path, server, **role)
    if not cache:
        data["cache_path"] = ""
    return LLMClient(LLMConfig.model_validate(data))


def _ask(client: LLMClient, messages=MSG, role="generator"):
    return asyncio.run(client.generate(role, messages, output=Capital, stage="s"))


EMPTY_CHOICES = Reply(body=b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}')
NO_MESSAGE = Reply(body=b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", '
                        b'"choices": [{"index": 0, "finish_reason": "stop"}]}')


@pytest.mark.parametrize("fault", [EMPTY_CHOICES, NO_MESSAGE, Reply(drop=True), Reply(status=503)],
                         ids=["empty-choices", "no-message", "dropped-connection", "503"])
def test_a_faulty_response_is_retried_then_answered(model, tmp_path, fault):
    with FakeOpenAI([fault, Reply()]) as server:
        res = _ask(_client(tmp_path, server, model=model))
    assert res.ok and res.value.capital == "Paris" and server.n_requests == 2


@pytest.mark.parametrize("fault", [EMPTY_CHOICES, NO_MESSAGE, Reply(status=429), Reply(drop=True)],
                         ids=["empty-choices", "no-message", "429", "dropped-connection"])
def test_a_call_that_keeps_failing_is_a_transient_failure_not_an_exception(model, tmp_path, fault):
    with FakeOpenAI([fault]) as server:
        res = _ask(_client(tmp_path, server, model=model, max_retries=1))
    assert not res.ok and res.transient and "gave up after 2 attempts" in res.error and server.n_requests == 2


def test_answers_the_model_got_wrong_are_failures_but_not_transient(model, tmp_path):
    with FakeOpenAI([Reply("no JSON here")]) as server:
        wrong = _ask(_client(tmp_path, server, model=model, structured_retries=1))
    with FakeOpenAI([Reply(status=400, error="prompt is malformed")]) as server:
        refused = _ask(_client(tmp_path, server, model=model))
    assert not wrong.ok and not wrong.transient
    assert not refused.ok and not refused.transient


def test_transient_failures_of_a_block_are_collected_across_its_tasks(tmp_path):
    with FakeOpenAI([Reply(status=500)]) as server:
        client = _client(tmp_path, server, max_retries=0)

        async def item():
            with transient_failures() as failures:  # calls in tasks started inside the block count too
                await asyncio.gather(*(client.generate("generator", [{"role": "user", "content": f"q{i}"}],
                                                       output=Capital, stage="s") for i in range(3)))
            return failures

        failures = asyncio.run(item())
    assert len(failures.errors) == 3
    with pytest.raises(Unavailable, match=r"tree-0007: 3 LLM call\(s\) failed after their retries"):
        failures.check("tree-0007")


def test_a_lone_surrogate_in_an_answer_is_sanitised_stored_and_replayed_cleanly(tmp_path):
    poisoned = Reply('{"capital": "Par\\ud800is"}')  # valid JSON whose string holds a lone surrogate
    with FakeOpenAI([poisoned, Reply(status=500)]) as server:
        first = _ask(_client(tmp_path, server, cache=True))
        assert first.ok and first.value.capital == "Par\ufffdis"
        log = StageLog(tmp_path / "verdicts.jsonl")
        log.append("k", {"value": first.value.model_dump(), "raw": first.text})  # the stage log takes it
        stored = json.loads((tmp_path / "verdicts.jsonl").read_text(encoding="utf-8"))
        assert stored["value"]["capital"] == "Par\ufffdis"
        again = _ask(_client(tmp_path, server, cache=True))  # a re-run: answered by the cache, cleanly
    assert again.ok and again.cached and again.value.capital == "Par\ufffdis" and server.n_requests == 1


def test_a_raw_lone_surrogate_in_the_response_body_does_not_crash_the_cache(model, tmp_path):
    body = ('{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
            '"finish_reason": "stop", "message": {"role": "assistant", "content": "{\\"capital\\": \\"Pa\\ud800\\"}"}}]}')
    with FakeOpenAI([Reply(body=body.encode())]) as server:
        res = _ask(_client(tmp_path, server, model=model, cache=True))
    # the lone surrogate ends the value: it is cut there (clean_value ends it at its last whole character)
    assert res.ok and res.value.capital == "Pa" and "\ud800" not in res.text and "\ufffd" in res.text


def test_stage_log_never_crashes_on_a_lone_surrogate(tmp_path):
    log = StageLog(tmp_path / "x.jsonl")
    log.append("k", {"text": "bad \ud800 text"})
    assert StageLog(tmp_path / "x.jsonl").get("k")["text"] == "bad ? text"


def test_provider_error_text_is_scrubbed_of_the_api_key_and_bearer_tokens(model, tmp_path, monkeypatch):
    monkeypatch.setenv("RF_TEST_KEY", KEY)
    echo = (f"invalid request; headers were {{'authorization': 'Bearer {KEY}', 'x-api-key': '{KEY}'}} "
            "and a stray Bearer abcdef0123456789abcdef")
    with FakeOpenAI([Reply(status=400, error=echo)]) as server:
        res = _ask(_client(tmp_path, server, model=model, api_key_env="RF_TEST_KEY"))
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"  # the key did reach the server
    assert not res.ok and "invalid request" in res.error
    assert KEY not in res.error and "abcdef0123456789abcdef" not in res.error and "[redacted]" in res.error
    with FakeOpenAI([Reply(status=503, error=echo)]) as server:  # transient errors too
        res = _ask(_client(tmp_path, server, model=model, api_key_env="RF_TEST_KEY", max_retries=0))
    assert res.transient and KEY not in res.error


def test_an_answer_echoing_the_key_is_not_cached_with_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RF_TEST_KEY", KEY)
    with FakeOpenAI([Reply(json.dumps({"capital": f"Paris {KEY}"}))]) as server:
        client = _client(tmp_path, server, cache=True, api_key_env="RF_TEST_KEY")
        res = _ask(client)
        asyncio.run(client.aclose())
    assert res.ok and KEY not in res.text and KEY not in res.value.capital
    assert KEY.encode() not in (tmp_path / "llm-cache.sqlite").read_bytes()


def test_retry_after_is_honoured(model, tmp_path, monkeypatch):
    from rubricforge.llm import client as client_module

    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(client_module.asyncio, "sleep", sleep)
    with FakeOpenAI([Reply(status=429, headers={"retry-after": "7"}), Reply()]) as server:
        res = _ask(_client(tmp_path, server, model=model, backoff_s=0.01))
    assert res.ok and server.n_requests == 2
    assert pauses == [7.0]  # the server's hint, not the 10 ms backoff


def test_each_roles_concurrency_holds_when_roles_share_a_model_and_server(tmp_path):
    with FakeOpenAI([Reply(delay_s=0.3)]) as server:
        data = litellm_llm_config(tmp_path, server)
        data["cache_path"] = ""
        data["generator"] = {**data["generator"], "concurrency": 1}
        data["verifier"] = {**data["verifier"], "concurrency": 3}
        client = LLMClient(LLMConfig.model_validate(data))

        async def run():
            calls = [client.generate(role, [{"role": "user", "content": f"{role} q{i}"}], output=Capital, stage="s")
                     for i in range(6) for role in ("generator", "verifier")]
            return await asyncio.gather(*calls)

        assert all(r.ok for r in asyncio.run(run()))
    assert server.max_in_flight_by == {"generator": 1, "verifier": 3}
