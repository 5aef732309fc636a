"""Retries with backoff on 429 / 5xx / timeouts, giving up cleanly, schema-mode step-down, and the
per-model concurrency limit (counted at the server, also across event loops in threads)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rubricforge.config import LLMConfig
from rubricforge.llm import LLMClient
from rubricforge.llm.limits import CrossLoopSemaphore
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import Capital, litellm_llm_config

MSG = [{"role": "user", "content": "What is the capital of France?"}]


def _client(tmp_path, server: FakeOpenAI, **role) -> LLMClient:
    return LLMClient(LLMConfig.model_validate({**litellm_llm_config(tmp_path, server, **role), "cache_path": ""}))


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_status_is_retried(model, tmp_path, status):
    with FakeOpenAI([Reply(status=status), Reply(status=status), Reply()]) as server:
        client = _client(tmp_path, server, model=model)
        res = asyncio.run(client.generate("generator", MSG, output=Capital, stage="s"))
    assert res.ok and res.value.capital == "Paris" and len(server.requests) == 3
    assert client.ledger.summary()["total"]["requests"] == 1  # only the answer is booked


def test_timeout_is_retried(tmp_path):
    with FakeOpenAI([Reply(delay_s=3.0), Reply()]) as server:
        res = asyncio.run(_client(tmp_path, server, timeout_s=0.5).generate("generator", MSG, output=Capital,
                                                                            stage="s"))
    assert res.ok and len(server.requests) == 2


def test_gives_up_after_max_retries_with_ok_false(model, tmp_path):
    with FakeOpenAI([Reply(status=503)]) as server:
        client = _client(tmp_path, server, model=model, max_retries=2)
        res = asyncio.run(client.generate("generator", MSG, output=Capital, stage="s"))
    assert not res.ok and res.value is None and len(server.requests) == 3
    assert "gave up after 3 attempts" in res.error and ("ServiceUnavailable" in res.error or "HTTP 503" in res.error)
    assert client.ledger.summary()["total"]["failures"] == 1


def test_bad_request_is_not_retried(model, tmp_path):
    with FakeOpenAI([Reply(status=400, error="prompt is malformed")]) as server:
        res = asyncio.run(_client(tmp_path, server, model=model).generate("generator", MSG, output=Capital, stage="s"))
    assert not res.ok and "prompt is malformed" in res.error and len(server.requests) == 1


# llama-cpp-python's own server (python -m llama_cpp.server) refuses json_schema with HTTP 500 and this body
LLAMA_CPP_SERVER_REFUSAL = ("1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
                            "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")


@pytest.mark.parametrize("status, error", [(400, "response_format type json_schema is not supported"),
                                           (500, LLAMA_CPP_SERVER_REFUSAL)], ids=["400", "llama-cpp-server-500"])
def test_server_refusing_json_schema_steps_down_to_json_object(model, tmp_path, status, error):
    with FakeOpenAI([Reply(status=status, error=error), Reply()]) as server:
        client = _client(tmp_path, server, model=model)
        first = asyncio.run(client.generate("generator", MSG, output=Capital, stage="s"))
        second = asyncio.run(client.generate("generator", MSG + MSG, output=Capital, stage="s"))
    assert first.ok and second.ok
    formats = [r.get("response_format", {}) for r in server.requests]
    assert [f.get("type") for f in formats] == ["json_schema", "json_object", "json_object"]  # no retries; remembered
    assert formats[1]["schema"] == Capital.model_json_schema()  # a self-hosted server gets the schema as a grammar


@pytest.mark.parametrize("mode, sent", [("json_object", "json_object"), ("plain", None)])
def test_a_set_structured_mode_is_used_as_set_and_never_stepped_down(model, tmp_path, mode, sent):
    with FakeOpenAI([Reply()]) as server:
        res = asyncio.run(_client(tmp_path, server, model=model, structured=mode).generate(
            "generator", MSG, output=Capital, stage="s"))
    assert res.ok and server.requests[0].get("response_format", {}).get("type") == sent
    with FakeOpenAI([Reply(status=400, error="response_format json_object is not supported")]) as server:
        res = asyncio.run(_client(tmp_path, server, model=model, structured="json_object").generate(
            "generator", MSG, output=Capital, stage="s"))
    assert not res.ok and len(server.requests) == 1 and "json_object is not supported" in res.error


def test_concurrency_limit_holds_at_the_server(tmp_path):
    with FakeOpenAI([Reply()], hold=2, expected=8) as server:
        client = _client(tmp_path, server, concurrency=2)

        async def run():
            return await asyncio.gather(*[client.generate("generator", [{"role": "user", "content": f"q{i}"}],
                                                          output=Capital, stage="s") for i in range(8)])

        assert all(r.ok for r in asyncio.run(run()))
    assert server.max_in_flight == 2 and len(server.requests) == 8


def test_the_direct_client_keeps_connections_alive_and_closes_its_session_with_the_loop(tmp_path, recwarn):
    """40 requests at once in flight, then 40 more over the same 40 connections; ``asyncio.run`` closing the
    loop closes the loop's session (no "Unclosed client session" from aiohttp), and a new loop gets a new one."""
    import gc

    with FakeOpenAI([Reply()], hold=40, expected=40) as server:
        client = _client(tmp_path, server, concurrency=40)
        backend: list = []

        async def run(tag: str):
            rounds = []
            for r in range(2):
                rounds.append(await asyncio.gather(*[client.generate(
                    "generator", [{"role": "user", "content": f"{tag}{r}-q{i}"}], output=Capital, stage="s")
                    for i in range(40)]))
            backend.append(client._backends["openai-http"])
            return rounds

        assert all(r.ok for rounds in (asyncio.run(run("a")), asyncio.run(run("b"))) for rs in rounds for r in rs)
        gc.collect()
    assert server.max_in_flight == 40 and len(server.requests) == 160
    assert len(server.connections) == 80  # 40 per loop, each reused for the second round
    sessions = backend[0]._sessions
    assert all(s.closed for s, _ in sessions.values()) and len(sessions) <= 1  # the second loop's (closed)
    assert not [w for w in recwarn if "Unclosed" in str(w.message)]


def test_concurrency_limit_holds_across_event_loops_in_threads(tmp_path):
    with FakeOpenAI([Reply()], hold=3, expected=12) as server:
        client = _client(tmp_path, server, concurrency=3)
        results: list[bool] = []

        def worker(n: int) -> None:
            async def run():
                return await asyncio.gather(*[client.generate(
                    "generator", [{"role": "user", "content": f"t{n}-q{i}"}], output=Capital, stage="s")
                    for i in range(4)])
            results.extend(r.ok for r in asyncio.run(run()))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # the limit, reached (the server held the requests until 3 were in flight) and never exceeded
    assert results == [True] * 12 and server.max_in_flight == 3 and len(server.requests) == 12


def test_cancelled_waiters_do_not_leak_slots():
    async def run():
        sem = CrossLoopSemaphore(1)
        await sem.acquire()
        waiters = [asyncio.ensure_future(sem.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        waiters[0].cancel()
        sem.release()  # handed to waiter 0 just as it is cancelled: it must pass the slot on
        await asyncio.sleep(0.01)
        assert waiters[1].done() and not waiters[2].done()
        waiters[2].cancel()
        sem.release()
        await asyncio.wait_for(sem.acquire(), timeout=5)  # the slot is free again, not lost

    asyncio.run(run())


def test_a_free_slot_goes_to_the_lowest_priority_then_the_first_come():
    from rubricforge.llm.limits import PRIORITY

    async def run():
        sem = CrossLoopSemaphore(1)
        await sem.acquire()
        served: list[str] = []

        async def wait(name: str, priority: int) -> None:
            PRIORITY.set(priority)  # this task's context only
            async with sem.hold():
                served.append(name)

        waiters = []
        for name, priority in [("late tree", 5), ("first tree, call 1", 1), ("middle tree", 3),
                               ("first tree, call 2", 1), ("no tree", 0)]:
            waiters.append(asyncio.ensure_future(wait(name, priority)))
            await asyncio.sleep(0)  # queued in this order
        waiters[2].cancel()  # a cancelled waiter leaves the queue
        await asyncio.sleep(0)
        sem.release()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert served == ["no tree", "first tree, call 1", "first tree, call 2", "late tree"]
        await asyncio.wait_for(sem.acquire(), timeout=5)  # and the slot is free again

    asyncio.run(run())


def test_the_direct_client_takes_its_proxy_from_the_environment(monkeypatch):
    from rubricforge.llm.backends.openai_http import _proxy

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    _proxy.cache_clear()
    try:
        assert _proxy("http://gpu-box:8000/v1/chat/completions") == "http://proxy.example:3128"
        assert _proxy("http://127.0.0.1:8000/v1/chat/completions") is None
        assert _proxy("https://gpu-box/v1/chat/completions") is None  # no HTTPS_PROXY
    finally:
        _proxy.cache_clear()
