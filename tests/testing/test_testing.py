"""``rubricforge.testing.FakeOpenAI`` answers by the stage the client names in its header, over both ways to an
OpenAI-compatible server (the direct HTTP client and litellm)."""

from __future__ import annotations

import asyncio

from rubricforge.config import LLMConfig
from rubricforge.llm import LLMClient
from rubricforge.llm.request import STAGE_HEADER
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import Capital, litellm_llm_config

MSG = [{"role": "user", "content": "What is the capital of France?"}]


def _ask(tmp_path, server: FakeOpenAI, model: str, stages: list[str], **role) -> list:
    client = LLMClient(LLMConfig.model_validate({**litellm_llm_config(tmp_path, server, model=model, **role),
                                                 "cache_path": ""}))

    async def ask() -> list:
        return [await client.generate("generator", MSG, output=Capital, stage=s, seed=n) for n, s in enumerate(stages)]

    return asyncio.run(ask())


def test_the_same_prompt_gets_each_stages_answer(model, tmp_path):
    table = {"extract": '{"capital": "Lyon"}', "verify": [Reply('{"capital": "Nice"}'), '{"capital": "Metz"}'],
             "pref_item:*": lambda body: Reply('{"capital": "Brest"}')}
    with FakeOpenAI(stages=table) as server:
        got = _ask(tmp_path, server, model, ["extract", "verify", "verify", "verify", "pref_item:drb"])
    assert [r.value.capital for r in got] == ["Lyon", "Nice", "Metz", "Metz", "Brest"]  # a list's last answer repeats
    assert server.stages == ["extract", "verify", "verify", "verify", "pref_item:drb"]


def test_a_stage_without_an_answer_fails_naming_the_stage(model, tmp_path):
    with FakeOpenAI(stages={"extract": '{"capital": "Lyon"}'}) as server:
        [got] = _ask(tmp_path, server, model, ["merge"], max_retries=0)
    assert not got.ok and "no answer scripted for stage 'merge'" in got.error


def test_the_stage_header_carries_the_stage_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICFORGE_TEST_KEY", "sk-secret-123")
    with FakeOpenAI(stages={"check": '{"capital": "Paris"}'}) as server:
        _ask(tmp_path, server, "openai/fake-model", ["check"], api_key_env="RUBRICFORGE_TEST_KEY")
    [headers] = server.headers
    assert headers[STAGE_HEADER.lower()] == "check"
    assert [k for k, v in headers.items() if "sk-secret-123" in v] == ["authorization"]
