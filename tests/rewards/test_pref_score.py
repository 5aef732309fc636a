"""Seed 004's scoring and metrics with values worked by hand (docs/methods.md Q-2, Q-3, Q-4, Q-7), and S(r|y)
through the real client and judge against a scripted judge server (C.2 prompts, ``rating: n`` answers)."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricforge.config import Config
from rubricforge.rewards.prefs import metrics as pm
from rubricforge.rewards.prefs.pref_score import Rating, preference_reward, pref_score, pref_score_from_ratings
from rubricforge.rubric_gen.pref_rubrics import parse_rubric_items, pref_criteria, pref_format_reward
from rubricforge.schema import Criterion
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.pref_fakes import APP_I, PREFS_JUDGE


def _criteria(weights):
    return [Criterion(id=f"c{n}", type="logical", description=f"item {n}", weight=w) for n, w in enumerate(weights)]


def test_s_of_r_given_y_exact_values():
    criteria, ratings = _criteria([5, 3, -2]), {"c0": 10, "c1": 4, "c2": 7}  # v̂ = [1, 1/3, 2/3]
    assert pref_score_from_ratings(ratings, criteria) == pytest.approx(0.777778, abs=1e-6)  # Σw = 6
    assert pref_score_from_ratings(ratings, criteria, "positive") == pytest.approx(0.583333, abs=1e-6)  # Σ_{w>0} = 8
    # Σw ≤ 0 falls back to the positive weights
    assert pref_score_from_ratings({"c0": 10, "c1": 1}, _criteria([2, -3])) == pytest.approx(1.0)


def test_rating_parse():
    assert Rating.from_text("rating: 7").rating == 7
    assert Rating.from_text("**Rating**: 10\n").rating == 10
    assert Rating.from_text(" 8\n").rating == 8
    for bad in ("rating: 0", "rating: 11", "I think it is good", "8 out of 10"):
        with pytest.raises(ValueError):
            Rating.from_text(bad)


def test_preference_reward():
    assert preference_reward(0.78, 0.50) == 1
    assert preference_reward(0.5, 0.5) == -1  # a tie is -1
    assert preference_reward(None, 0.5) is None and preference_reward(0.5, None) is None


def test_metrics_exact_values():
    deltas = [0.2, -0.1, 0.3, 0.0]
    assert pm.preference_accuracy(deltas) == 0.5
    assert pm.paired_cohens_d(deltas) == pytest.approx(0.547723, abs=1e-6)
    assert pm.paired_cohens_d(deltas, ddof=0) == pytest.approx(0.632456, abs=1e-6)
    m = pm.preference_metrics([(0.7, 0.5), (0.4, 0.5), (0.9, 0.6), (0.5, 0.5), (None, 0.3)], n_boot=500)
    assert (m.n, m.unscored, m.ties, m.accuracy) == (4, 1, 1, 0.5)
    lo, hi = m.accuracy_ci
    assert 0 <= lo <= 0.5 <= hi <= 1
    assert pm.preference_metrics([(0.7, 0.5), (0.4, 0.5), (0.9, 0.6), (0.5, 0.5)], n_boot=500).accuracy_ci == (lo, hi)
    assert pm.paired_cohens_d([0.1, 0.1]) is None  # sd = 0: undefined, not infinite


def test_cohens_d_of_equal_gaps_is_undefined_despite_rounding():
    """The audit's case: equal gaps 0.2, 0.2, 0.2 (as score differences) leave a rounding-noise sd of about 6.5e-17,
    which used to give d about 3e15; a real spread, however small against the gaps, still gives a d."""
    gaps = [0.7 - 0.5, 0.9 - 0.7, 0.6 - 0.4]
    assert len(set(gaps)) > 1  # the floats differ in their last bits
    assert pm.paired_cohens_d(gaps) is None and pm.paired_cohens_d(gaps, ddof=0) is None
    assert pm.paired_cohens_d([0.0, 0.0, 0.0]) is None
    assert pm.paired_cohens_d([0.2, 0.2, 0.2 + 1e-6]) == pytest.approx(0.2 / 5.7735e-7, rel=1e-3)
    assert pm.preference_metrics([(0.7, 0.5), (0.9, 0.7), (0.6, 0.4)], n_boot=50).cohens_d is None


def test_format_reward_exact_cases():
    app_i = json.dumps(APP_I)
    assert pref_format_reward(app_i) == 0
    items, warnings = parse_rubric_items(app_i)
    assert len(items) == 13 and warnings == []
    assert pref_format_reward(json.dumps([{k: v for k, v in APP_I[0].items() if k != "weight"}, *APP_I[1:]])) == -1
    assert pref_format_reward(json.dumps({"rubrics": APP_I})) == -1
    assert pref_format_reward(f"```json\n{app_i}\n```\nThese rubrics cover the request.") == 0
    assert pref_format_reward(app_i + "\nI hope this helps.") == 0
    assert pref_format_reward(json.dumps([{**i, "weight": -1} for i in APP_I])) == -1
    assert pref_format_reward("no json here") == -1
    short = parse_rubric_items(json.dumps([{"title": "Too short", "description": "Covers it.", "weight": 7}]))[1]
    assert short == ["1 items (C.1 asks for 7-20)", "item 0: no 'Key/Important/Optional/Error Criterion:' prefix"]
    criteria = pref_criteria(items)
    assert criteria[0].id == "R1" and criteria[0].title == "Coverage of Common Failures" and criteria[-1].weight == -1


def _judge(tmp_path, server):
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.judging import Judge

    cfg = Config.model_validate({"llm": litellm_llm_config(tmp_path, server, structured_retries=1)})
    return Judge(LLMClient(cfg.llm))


def test_report_score_through_the_judge(tmp_path):
    criteria = pref_criteria(APP_I)  # 10 positive items (weights 5,5,5,4,4,3,3,2,2,1) and 3 error items (-2,-2,-1)

    async def run(judge, report):
        return await pref_score(judge, "Please analyse common network failures.", report, criteria)

    with FakeOpenAI(stages=PREFS_JUDGE) as server:
        judge = _judge(tmp_path, server)
        good = asyncio.run(run(judge, "GOOD report"))
        bad = asyncio.run(run(judge, "weak report"))
        broken = asyncio.run(run(judge, "BROKEN report"))
        calls_before = server.n_requests
        again = asyncio.run(run(judge, "GOOD report"))
    # good: positives 9 (v̂ 8/9), errors 4 (v̂ 3/9); Σw = 34 - 5 = 29
    assert good.value == pytest.approx((34 * 8 / 9 - 5 * 3 / 9) / 29)
    assert bad.value == pytest.approx((34 * 3 / 9 - 5 * 8 / 9) / 29)
    assert set(good.ratings.values()) == {9, 4} and good.unscored == 0
    assert broken.value is None and broken.unscored == 13 and set(broken.ratings.values()) == {None}
    assert again.value == good.value and server.n_requests == calls_before  # the LLM cache answered
    first_item = "Rubric: Coverage of Common Failures: " + APP_I[0]["description"]
    prompt = next(r["messages"] for r in server.requests if first_item in r["messages"][-1]["content"])
    assert prompt[0]["content"].startswith("You are a precise and impartial scoring model.")
    assert prompt[1]["content"].startswith("**Input Information**\nQuery: Please analyse common network failures.")
    assert prompt[1]["content"].rstrip().endswith(first_item)
