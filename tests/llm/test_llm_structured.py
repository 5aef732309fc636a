"""Structured output: tolerant JSON extraction, validation, re-prompting with the validation error, and a
recorded failure (never an invented value) — through the real litellm backend and a fake server."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel, Field

from rubricforge.config import LLMConfig
from rubricforge.llm import LLMClient
from rubricforge.llm.structured import extract_json, parse
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config

MSG = [{"role": "user", "content": "Name the capital of France and two facts."}]


class Answer(BaseModel):
    capital: str
    facts: list[str] = Field(min_length=2)


@pytest.mark.parametrize("text", [
    '{"a": {"b": [1, 2]}}',
    'Sure! Here it is:\n```json\n{"a": {"b": [1, 2]}}\n```\nAnything else?',
    '```\n{"a": {"b": [1, 2]}}\n```',
    'The answer {not json} is {"a": {"b": [1, 2]}} as requested. {"a": 0}',
])
def test_extract_json_finds_the_first_object_despite_fences_and_prose(text):
    assert extract_json(text) == {"a": {"b": [1, 2]}}


TRUNCATED = '{"positive_rubrics": [{"title": "a", "description": "x"}, {"title": "b", "desc'


@pytest.mark.parametrize("text", [
    TRUNCATED,
    '```json\n{"positive_rubrics": [{"title": "a", "description": "x"}, {"title": "b", ',  # an unclosed fence
    '{"positive_rubrics": [{"title": "a", "description": "x"}], "delete_ids": [\n  ',
    '{"positive_rubrics": [{"title": "a", "description": "x"}], "weight": tru',  # inside a literal
    '{"positive_rubrics": [{"title": "a", "description": "x"}], "weight": 0.',  # inside a number
])
def test_an_answer_cut_off_before_its_closing_brace_is_an_error_not_an_inner_object(text):
    with pytest.raises(ValueError, match="cut off"):
        extract_json(text)


@pytest.mark.parametrize("text", ['Use {x} or {y: then {"a": 1}', 'Use { then {"a": 1}', '{"a": 1} and {"b": tru'])
def test_a_stray_brace_in_prose_still_leaves_the_object_after_it(text):
    assert extract_json(text) == {"a": 1}


def test_a_cut_off_answer_fails_even_when_every_field_has_a_default(tmp_path):
    from rubricforge.rubric_gen.bank import RubricUpdate

    value, error = parse(TRUNCATED, RubricUpdate)
    assert value is None and "cut off" in error
    with FakeOpenAI([Reply(TRUNCATED), Reply(TRUNCATED)]) as server:
        client = LLMClient(LLMConfig.model_validate(litellm_llm_config(tmp_path, server, structured_retries=1)))
        res = asyncio.run(client.generate("judge", MSG, output=RubricUpdate, stage="evolve_update"))
    assert not res.ok and res.value is None and "after 2 attempt(s)" in res.error and "cut off" in res.error
    assert "cut off" in server.requests[1]["messages"][-1]["content"]  # the re-prompt says what went wrong
    assert client.ledger.summary()["by_stage"]["evolve_update"]["failures"] == 1


def test_parse_reports_what_is_wrong_without_urls_or_inputs():
    value, error = parse('{"capital": "Paris", "facts": ["one"]}', Answer)
    assert value is None and "facts" in error and "at least 2" in error and "http" not in error
    assert parse("I cannot answer that.", Answer) == (None, "no JSON object found in the answer")
    value, error = parse('ok: {"capital": "Paris", "facts": ["a", "b"]}', Answer)
    assert error is None and value == Answer(capital="Paris", facts=["a", "b"])


def test_invalid_answer_is_reprompted_with_the_validation_error_then_accepted(tmp_path):
    bad = '{"capital": "Paris", "facts": ["only one"]}'
    good = '{"capital": "Paris", "facts": ["on the Seine", "about 2 million people"]}'
    with FakeOpenAI([Reply(bad), Reply(good)]) as server:
        client = LLMClient(LLMConfig.model_validate(litellm_llm_config(tmp_path, server)))
        res = asyncio.run(client.generate("generator", MSG, output=Answer, stage="extract"))
    assert res.ok and res.value.facts == ["on the Seine", "about 2 million people"] and res.attempts == 2
    first, second = server.requests
    assert first["messages"] == MSG
    assert first["response_format"]["json_schema"]["schema"] == Answer.model_json_schema()
    assert second["messages"][:2] == MSG + [{"role": "assistant", "content": bad}]
    feedback = second["messages"][2]["content"]
    assert second["messages"][2]["role"] == "user" and "facts" in feedback and "at least 2" in feedback
    assert res.usage["prompt_tokens"] == 22 and res.usage["completion_tokens"] == 14  # both attempts
    total = client.ledger.summary()["total"]
    assert total["requests"] == 2 and total["failures"] == 0 and total["calls"] == 1


def test_still_invalid_after_the_reprompts_is_a_recorded_failure_with_the_raw_text(tmp_path):
    with FakeOpenAI([Reply('{"capital": "Paris"}'), Reply("Paris."), Reply('{"facts": []}')]) as server:
        cfg = LLMConfig.model_validate(litellm_llm_config(tmp_path, server, structured_retries=2))
        client = LLMClient(cfg)
        res = asyncio.run(client.generate("judge", MSG, output=Answer, stage="score"))
    assert not res.ok and res.value is None and res.text == '{"facts": []}'
    assert len(server.requests) == 3 and res.attempts == 3
    assert "after 3 attempt(s)" in res.error and "capital" in res.error
    summary = client.ledger.summary()
    assert summary["by_role"]["judge"]["failures"] == 1 and summary["by_stage"]["score"]["failures"] == 1
    assert summary["total"]["requests"] == 3


def test_plain_text_calls_return_the_text(tmp_path):
    with FakeOpenAI([Reply("Paris is the capital.")]) as server:
        client = LLMClient(LLMConfig.model_validate(litellm_llm_config(tmp_path, server)))
        res = asyncio.run(client.generate("generator", MSG, stage="free"))
    assert res.ok and res.value is None and res.text == "Paris is the capital."
    assert "response_format" not in server.requests[0]


def test_a_models_schema_is_built_once_and_each_request_gets_its_own_copy(monkeypatch):
    from rubricforge.llm.structured import schema_of

    class Once(BaseModel):
        answer: str = Field(json_schema_extra={"maxLength": 5})

    built = []
    original = Once.model_json_schema.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(Once, "model_json_schema", classmethod(lambda cls, *a, **k: built.append(1) or original(cls, *a, **k)))
    first, second = schema_of(Once), schema_of(Once)
    assert first == second == original(Once) and len(built) == 1
    first["properties"]["answer"]["maxLength"] = 99  # a caller's change reaches no other request
    assert schema_of(Once)["properties"]["answer"]["maxLength"] == 5
