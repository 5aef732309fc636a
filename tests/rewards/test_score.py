"""SCORE's evaluator side without training (docs/methods.md S-1–S-5, S-7): values worked by hand,
the selection / harness validation rules, and the assessment and harness calls through the litellm backend
against a scripted OpenAI-compatible judge."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricforge.config import Config
from rubricforge.rewards.score.evaluator import (EmaBaseline, assess, check_citations, extract_conclusion,
                                       pairwise_consistency, score_report_reward, valid_citation_ratio, verified)
from rubricforge.rubric_gen.score_dims import (DIMENSIONS, DimensionScheduler, Harness, default_selection,
                                               harness_due, parse_selection, refresh_harness, selection_messages)
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config


# ---------------------------------------------------------------- S-1

def test_scheduler_spec_case():
    s = DimensionScheduler(pool={"d1": "a", "d2": "b", "d3": "c"})
    s.update(["d1", "d2"], 0.4)
    s.update(["d1", "d3"], 0.8)
    assert {d: v.n for d, v in s.stats.items()} == {"d1": 2, "d2": 1, "d3": 1}
    assert {d: v.consistency for d, v in s.stats.items()} == pytest.approx({"d1": 0.6, "d2": 0.4, "d3": 0.8})
    assert s.constraints([]) == {"required": [], "avoided": [], "hints": ["d1", "d2", "d3"]}


def test_scheduler_avoids_the_least_consistent_seasoned_dimensions():
    pool = {f"d{i}": "x" for i in range(6)}
    s = DimensionScheduler(pool=pool)
    for _ in range(5):
        for i in range(6):
            s.update([f"d{i}"], 0.1 * i, solver_reward=1.0)
    got = s.constraints(["d5"])
    assert got["hints"] == [] and got["avoided"] == ["d0"]  # bottom 20 % of 5 seasoned, non-required dims
    restored = DimensionScheduler()
    restored.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert restored == s


# ---------------------------------------------------------------- S-2

def test_harness_refresh_steps():
    assert [t for t in range(1, 13) if harness_due(t)] == [5, 10]


def _harness_client(tmp_path, server):
    cfg = Config.model_validate({"llm": litellm_llm_config(tmp_path, server)})
    from rubricforge.llm import LLMClient

    return LLMClient(cfg.llm)


@pytest.mark.parametrize(("answer", "kept", "must"), [
    ({"dimension_constraints": {"k": 3, "must_include": ["factuality", "nonexistent"], "weight_min": 0.2,
                                "weight_max": 0.4}}, False, ["factuality"]),
    ({"dimension_constraints": {"k": 3, "must_include": ["nonexistent"], "weight_min": 0.2, "weight_max": 0.4}},
     True, ["factuality"]),
    ({"dimension_constraints": {"k": 3, "must_include": ["factuality"], "weight_min": 0.6, "weight_max": 0.5}},
     True, ["factuality"]),
])
def test_harness_answer_validation(tmp_path, answer, kept, must):
    previous = Harness()
    with FakeOpenAI([Reply(json.dumps(answer))]) as server:
        client = _harness_client(tmp_path, server)
        got, pool, why = asyncio.run(refresh_harness(client, "judge", {"x": 1}, previous, DIMENSIONS))
        asyncio.run(client.aclose())
    assert (got is previous) == kept and (why is not None) == kept
    assert got.dimension_constraints.must_include == must and pool == DIMENSIONS
    if not kept:
        assert got.dimension_constraints.k == 3 and got.dimension_constraints.weight_max == 0.4
    prompt = server.requests[0]["messages"]
    assert "You are an external researcher" in prompt[0]["content"] and '"x": 1' in prompt[1]["content"]


def test_harness_may_replace_the_pool(tmp_path):
    answer = {"dimension_constraints": {"k": 2, "must_include": ["accuracy"]},
              "dimension_pool": [{"name": "accuracy", "definition": "correct"}, {"name": "depth", "definition": "deep"}]}
    with FakeOpenAI([Reply(json.dumps(answer))]) as server:
        client = _harness_client(tmp_path, server)
        got, pool, why = asyncio.run(refresh_harness(client, "judge", {}, Harness(), DIMENSIONS))
        asyncio.run(client.aclose())
    assert why is None and pool == {"accuracy": "correct", "depth": "deep"} and got.dimension_pool is None


# ---------------------------------------------------------------- S-3 selection

def _xml(*dims: tuple[str, float | None]) -> str:
    body = "".join(f'<dim name="{d}"/>' if w is None else f'<dim name="{d}" weight="{w}"/>' for d, w in dims)
    return f"<dimensions>{body}</dimensions>"


def test_selection_rules():
    h = Harness()  # k 4, must_include factuality, weights in [0.1, 0.5]
    ok, why = parse_selection(_xml(("factuality", None), ("insight", 0.3), ("coherence", 0.2), ("fairness", 0.1)),
                              h, DIMENSIONS)
    assert why == "" and ok.weights == {"factuality": 1.0, "insight": 0.3, "coherence": 0.2, "fairness": 0.1}
    assert ok.describe() == ("Your report will be evaluated on: factuality (primary), insight (0.3), "
                             "coherence (0.2), fairness (0.1).")
    three, why = parse_selection(_xml(("factuality", None), ("insight", 0.3), ("coherence", 0.2)), h, DIMENSIONS)
    assert three is None and "expected exactly 3" in why
    heavy, why = parse_selection(_xml(("insight", 0.6), ("coherence", 0.2), ("fairness", 0.1)), h, DIMENSIONS)
    assert heavy is None and "outside [0.1, 0.5]" in why
    unknown, why = parse_selection(_xml(("magic", 0.3)), h, DIMENSIONS)
    assert unknown is None and "unknown dimension" in why
    assert parse_selection("no xml", h, DIMENSIONS)[0] is None
    assert default_selection(h).weights == {"factuality": 1.0}
    user = selection_messages("Why?", h, DIMENSIONS, {"hints": ["insight"], "avoided": []})[-1]["content"]
    assert "Select exactly 3 additional dimensions" in user and "[0.1, 0.5]" in user and "- readability:" in user


# ---------------------------------------------------------------- S-4

def test_report_reward_spec_values():
    assert score_report_reward(1, [0.4, 0.3, 0.3], [0.8, 0.5, 1.0]) == pytest.approx(1.77)
    assert score_report_reward(1, [1.0, 0.3, 0.2], [0.8, 0.5, 1.0]) == pytest.approx(2.15)
    assert score_report_reward(0, [0.4], [1.0]) == 0
    assert verified(1.77, depth=0, tau=1) == 0.0 and verified(1.77, depth=0, tau=1, mode="drop") is None
    assert verified(1.77, depth=1, tau=1) == 1.77 and verified(None, depth=0, tau=1) is None


# ---------------------------------------------------------------- S-5

def test_consistency_spec_values():
    assert pairwise_consistency(["the policy reduced emissions", "the policy reduced emissions",
                                 "costs rose sharply"]) == pytest.approx(1 / 3)
    assert pairwise_consistency(["The policy reduced emissions by 20 percent.",
                                 "The policy reduced emissions, but costs rose.",
                                 "Costs rose sharply for households."]) == pytest.approx(0.247685, abs=1e-6)
    # an unanswered rollout agrees with none: its pairs count 0 among all K(K-1)/2
    assert pairwise_consistency(["only one", "  "]) == 0.0
    assert pairwise_consistency(["the policy reduced emissions", "the policy reduced emissions", ""]) == pytest.approx(1 / 3)
    assert pairwise_consistency(["", ""]) == 0.0 and pairwise_consistency(["alone"]) is None
    assert pairwise_consistency(["政策减少了排放", "政策减少了排放"]) == pytest.approx(1.0)


def test_each_selection_is_credited_from_its_own_querys_rollouts(tmp_path):
    """Per-query credit (audit, SCORE §3.4 with Alg. 2): two valid selections, one followed by agreeing conclusions
    (C = 1), one by disagreeing ones with an unanswered rollout (C = 0); an invalid third earns 0. Â_e,i = C_i − b_0,
    and b_1 = 0.3 · mean C over the valid ones."""
    from types import SimpleNamespace

    from rubricforge.training.score import ScoreLoop, ScoreStep

    cfg = Config.model_validate({"run_dir": str(tmp_path / "run"), "score": {"harness_every": 100}})
    loop = ScoreLoop(cfg, SimpleNamespace(cfg=cfg.llm), None)  # no LLM call at a step without a harness refresh
    chosen = {"weights": {"factuality": 1.0}, "primary": ["factuality"]}
    loop.current = ScoreStep(1, selections={"a": chosen, "b": chosen, "c": None}, answers={
        "a": ["Tides follow the Moon.", "Tides follow the Moon."], "b": ["Volcanoes erupt from pressure.", ""],
        "c": ["Anything.", "Anything."]})
    advantages, metrics = loop.finish(None, ["a", "b", "c"])
    assert advantages == pytest.approx([1.0, 0.0, 0.0])
    assert metrics["score/r_eval"] == pytest.approx(0.5) and loop.baseline.value == pytest.approx(0.15)
    loop.current = ScoreStep(2, selections={"a": chosen, "b": chosen, "c": None}, answers={
        "a": ["Same.", "Same."], "b": ["Same.", "Same."], "c": []})
    assert loop.finish(None, ["a", "b", "c"])[0] == pytest.approx([0.85, 0.85, -0.15])


def test_ema_spec_values():
    b = EmaBaseline()
    assert b.advantage(0.5) == pytest.approx(0.5) and b.value == pytest.approx(0.15)
    assert b.advantage(0.2) == pytest.approx(0.05) and b.value == pytest.approx(0.165)
    assert b.advantage(0.165) == pytest.approx(0.0)


def test_conclusion_extraction():
    report = "# Report\nIntro.\n\n## Findings\nA.\n\n## Conclusion\nThe policy worked.\n\n## Sources\n[1] x"
    assert extract_conclusion(report) == "The policy worked."
    assert extract_conclusion("First paragraph.\n\nLast paragraph here.") == "Last paragraph here."
    assert extract_conclusion("word " * 300).count("word") == 200


# ---------------------------------------------------------------- S-3 assessment, S-7 citation check

def test_assessment_searches_then_scores(tmp_path, small_index_cfg):
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.judging import Judge

    final = ('<report_evaluations><report id="1"><scores><score dim="factuality" value="8" reason="ok"/>'
             '<score dim="insight" value="5" reason="ok"/></scores></report>'
             '<report id="2"><scores><score dim="factuality" value="4" reason="no"/></scores></report>'
             '</report_evaluations>')
    with FakeOpenAI([Reply("<search>Stanley Kubrick</search>"), Reply(final)]) as server:
        cfg = Config.model_validate({**small_index_cfg.model_dump(mode="json"),
                                     "llm": litellm_llm_config(tmp_path, server)})
        client, toolbox = LLMClient(cfg.llm), ToolBox.from_config(cfg)
        judge = Judge(client)
        got = asyncio.run(assess(judge, toolbox, "Who?", ["report one", "report two"],
                                 {"factuality": 1.0, "insight": 0.3}, ["factuality"], Harness().process_constraints.model_dump()))
        asyncio.run(client.aclose())
        toolbox.close()
    assert got.depth == 1 and got.calls == 2 and judge.counts()["calls"] == {"score_assess": 2}
    assert got.scores == [{"factuality": 0.8, "insight": 0.5}, None]  # report 2 lacks insight: unscored
    second = server.requests[1]["messages"]
    assert second[-2]["content"] == "<search>Stanley Kubrick</search>"
    assert second[-1]["content"].startswith("<observation>") and "<snippet id=" in second[-1]["content"]


def test_citation_check(tmp_path):
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.judging import Judge

    with FakeOpenAI([Reply('[{"idx": 1, "result": "supported"}, {"idx": 2, "result": "unsupported"}]')]) as server:
        client = LLMClient(Config.model_validate({"llm": litellm_llm_config(tmp_path, server)}).llm)
        got = asyncio.run(check_citations(Judge(client), "Kubrick directed it.", ["Kubrick directed it.", "In 1999.", "x"]))
        asyncio.run(client.aclose())
    assert got == ["supported", "unsupported", None]
    assert valid_citation_ratio(got) == 0.5 and valid_citation_ratio(["unknown"]) is None
    assert "'page not found'" in server.requests[0]["messages"][-1]["content"]


def test_train_score_cli_errors_are_one_line(tmp_path):
    from support.cli import assert_user_error, cli

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "question": "q"}) + "\n")
    # 4 writer rows + 2 evaluator rows do not split into 4 micro-batches of 1
    assert_user_error(cli("train", "score", "--dataset", str(data), "--model", "m", "--preset", "cpu", "--set",
                          "train.grpo_args={generation_batch_size: 4, per_device_train_batch_size: 1}"),
                      "SCORE adds 2 evaluator rows", "generation_batch_size = per_device_train_batch_size")
    assert_user_error(cli("train", "score", "--dataset", str(data), "--model", "m", "--preset", "cpu", "--set",
                          "score.harness_role=nobody"), "nobody")
