"""The content-addressed SQLite cache: key sensitivity, hits across client instances, only valid answers
stored, and concurrent writers (threads and processes) on one file."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

from pydantic import BaseModel

from rubricforge.config import LLMConfig
from rubricforge.llm import LLMClient
from rubricforge.llm.cache import ResponseCache
from rubricforge.llm.request import Completion, Request
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config
from support.paths import ROOT

MSG = [{"role": "user", "content": "What is the capital of France?"}]


class Capital(BaseModel):
    capital: str


class City(BaseModel):
    city: str


def _request(**change) -> Request:
    base = dict(role="generator", stage="s", model="openai/m", api_base="http://h/v1", messages=MSG,
                schema=Capital.model_json_schema(), schema_name="Capital", temperature=0.3, top_p=None,
                max_tokens=64, seed=0)
    return Request(**{**base, **change})


def test_key_changes_with_every_input_that_decides_the_answer_and_only_with_those():
    base = _request().key()
    assert _request().key() == base
    assert _request(role="judge", stage="other", schema_name="Renamed").key() == base  # labels only
    assert _request(api_base="http://h/v1/").key() == base  # a trailing slash is the same server
    changed = [_request(messages=[{"role": "user", "content": "What is the capital of Spain?"}]),
               _request(messages=MSG + [{"role": "assistant", "content": "x"}]),
               _request(model="openai/other"), _request(api_base="http://other/v1"),
               _request(schema=City.model_json_schema()), _request(schema=None),
               _request(temperature=0.0), _request(top_p=0.9), _request(max_tokens=65), _request(seed=1),
               _request(seed=None)]
    keys = [r.key() for r in changed]
    assert base not in keys and len(set(keys)) == len(keys)


def test_hits_across_client_instances_and_misses_on_a_changed_prompt_or_parameter(tmp_path):
    with FakeOpenAI([Reply('{"capital": "Paris"}')]) as server:
        cfg = LLMConfig.model_validate(litellm_llm_config(tmp_path, server))
        first = LLMClient(cfg)
        res = asyncio.run(first.generate("generator", MSG, output=Capital, stage="s"))
        assert res.ok and not res.cached and len(server.requests) == 1

        second = LLMClient(cfg)  # a later run: a new client on the same cache file

        async def calls():
            same = await second.generate("generator", MSG, output=Capital, stage="s")
            hotter = await second.generate("generator", MSG, output=Capital, stage="s", temperature=0.9)
            other = await second.generate("generator", [{"role": "user", "content": "Capital of Italy?"}],
                                          output=Capital, stage="s")
            return same, hotter, other

        same, hotter, other = asyncio.run(calls())
        assert same.ok and same.cached and same.value == Capital(capital="Paris") and same.attempts == 0
        assert not hotter.cached and not other.cached and len(server.requests) == 3
        total = second.ledger.summary()["total"]
        assert total["cache_hits"] == 1 and total["calls"] == 3 and total["requests"] == 2
        assert total["prompt_tokens"] == 2 * 11  # the hit added no tokens


def test_only_valid_answers_are_cached(tmp_path):
    with FakeOpenAI([Reply("no json here")]) as server:
        cfg = LLMConfig.model_validate(litellm_llm_config(tmp_path, server, structured_retries=0))
        for _ in range(2):
            res = asyncio.run(LLMClient(cfg).generate("generator", MSG, output=Capital, stage="s"))
            assert not res.ok and not res.cached
        assert len(server.requests) == 2
        assert len(ResponseCache(cfg.cache_path)) == 0


def test_a_reprompted_success_is_cached_under_the_first_request(tmp_path):
    with FakeOpenAI([Reply('{"capital": 1}'), Reply('{"capital": "Paris"}')]) as server:
        cfg = LLMConfig.model_validate(litellm_llm_config(tmp_path, server))
        res = asyncio.run(LLMClient(cfg).generate("generator", MSG, output=Capital, stage="s"))
        assert res.ok and res.attempts == 2
        again = asyncio.run(LLMClient(cfg).generate("generator", MSG, output=Capital, stage="s"))
        assert again.cached and again.value == Capital(capital="Paris") and len(server.requests) == 2


_WRITER = """
import sys
from rubricforge.llm.cache import ResponseCache
from rubricforge.llm.request import Completion, Request
cache = ResponseCache(sys.argv[1])
for i in range(100):
    msgs = [{"role": "user", "content": f"p{sys.argv[2]}-{i}"}]
    req = Request("r", "s", "m", None, msgs, None, None, 0.0, None, 8, 0)
    cache.put(req, Completion(text=f"a{sys.argv[2]}-{i}", prompt_tokens=i, completion_tokens=1))
    assert cache.get(req).text == f"a{sys.argv[2]}-{i}"
"""


def _req(tag: str, i: int) -> Request:
    return Request("r", "s", "m", None, [{"role": "user", "content": f"p{tag}-{i}"}], None, None, 0.0, None, 8, 0)


def test_concurrent_writers_in_threads_and_processes_share_one_file(tmp_path):
    path = tmp_path / "c.sqlite"
    shared = ResponseCache(path)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), f"proc{n}"],
                              cwd=ROOT) for n in range(2)]
    errors: list[BaseException] = []

    def writer(tag: str, cache: ResponseCache) -> None:
        try:
            for i in range(100):
                cache.put(_req(tag, i), Completion(text=f"a{tag}-{i}", prompt_tokens=i, completion_tokens=1))
                assert cache.get(_req(tag, i)).text == f"a{tag}-{i}"
        except BaseException as exc:  # reported below: a thread's assertion would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"t{n}", shared if n % 2 else ResponseCache(path)))
               for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert not errors
    fresh = ResponseCache(path)
    assert len(fresh) == 600
    assert fresh.get(_req("proc1", 99)).text == "aproc1-99" and fresh.get(_req("t3", 42)).prompt_tokens == 42
    shared.close()
    fresh.close()
