"""Recording any backend's responses and replaying them without it; a replay miss names the request."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from rubricforge.config import LLMConfig
from rubricforge.errors import UserError
from rubricforge.llm import LLMClient, ReplayMiss
from rubricforge.llm.recording import entry
from rubricforge.llm.request import Completion
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config


class Capital(BaseModel):
    capital: str


def _msg(country: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"What is the capital of {country}?"}]


def _replay_cfg(recorded: LLMConfig, path) -> LLMConfig:
    data = recorded.model_dump()
    for role in ("generator", "verifier", "judge"):
        data[role]["backend"] = "replay"
    return LLMConfig.model_validate({**data, "replay_path": str(path), "record_path": None})


def test_recorded_run_replays_without_the_server_including_reprompts(tmp_path):
    rec = tmp_path / "rec.jsonl"
    script = [Reply('{"capital": 7}'), Reply('{"capital": "Paris"}'), Reply('{"capital": "Rome"}')]
    with FakeOpenAI(script) as server:
        cfg = LLMConfig.model_validate({**litellm_llm_config(tmp_path, server), "record_path": str(rec)})
        client = LLMClient(cfg)

        async def run(c: LLMClient):
            return [await c.generate("generator", _msg(x), output=Capital, stage="s") for x in ("France", "Italy")]

        live = asyncio.run(run(client))
    assert [r.value.capital for r in live] == ["Paris", "Rome"] and live[0].attempts == 2
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    assert len(lines) == 3 and {ln["role"] for ln in lines} == {"generator"}

    replay = LLMClient(_replay_cfg(cfg, rec))  # the server is gone; the cache is not consulted
    again = asyncio.run(run(replay))
    assert [(r.ok, r.value, r.attempts) for r in again] == [(r.ok, r.value, r.attempts) for r in live]
    assert replay.ledger.summary()["total"]["prompt_tokens"] == 3 * 11


def test_replay_miss_names_role_stage_model_and_message(tmp_path):
    rec = tmp_path / "rec.jsonl"
    rec.write_text("")
    cfg = _replay_cfg(LLMConfig(cache_path=""), rec)
    with pytest.raises(ReplayMiss) as err:
        asyncio.run(LLMClient(cfg).generate("verifier", _msg("Peru"), output=Capital, stage="verify"))
    text = str(err.value)
    assert isinstance(err.value, UserError)
    for part in ("role=verifier", "stage=verify", f"model={cfg.verifier.model}", "capital of Peru", str(rec)):
        assert part in text


def test_hand_written_recording_answers_the_request_the_client_builds(tmp_path):
    rec = tmp_path / "rec.jsonl"
    cfg = _replay_cfg(LLMConfig(cache_path=""), rec)
    client = LLMClient(cfg)
    line = entry(client.request("judge", _msg("Chile"), output=Capital, stage="j"),
                 Completion(text='{"capital": "Santiago"}'))
    rec.write_text(json.dumps(line) + "\n")
    res = asyncio.run(client.generate("judge", _msg("Chile"), output=Capital, stage="j"))
    assert res.ok and res.value.capital == "Santiago"


def test_missing_replay_file_is_a_user_error(tmp_path):
    cfg = _replay_cfg(LLMConfig(cache_path=""), tmp_path / "nope.jsonl")
    with pytest.raises(UserError, match="nope.jsonl"):
        asyncio.run(LLMClient(cfg).generate("judge", _msg("Chile"), output=Capital, stage="j"))


def test_concurrent_recording_writes_each_key_once_as_whole_lines(tmp_path):
    rec = tmp_path / "rec.jsonl"
    countries = [f"Country{i}" for i in range(12)]
    with FakeOpenAI([Reply('{"capital": "X"}')]) as server:
        cfg = LLMConfig.model_validate({**litellm_llm_config(tmp_path, server, concurrency=6),
                                        "record_path": str(rec)})
        client = LLMClient(cfg)

        async def run():
            return await asyncio.gather(*[client.generate("generator", _msg(c), output=Capital, stage="s")
                                          for c in countries + countries[:4]])

        assert all(r.ok for r in asyncio.run(run()))
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    assert len(lines) == len({ln["key"] for ln in lines}) == 12
