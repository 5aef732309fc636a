"""The rewards with the real embedded model (Qwen2.5-Coder-0.5B, llama.cpp) as the judge, end to end:
every judge-based component gets a verdict or is counted unscored, and re-scoring costs no judge call."""

from __future__ import annotations

import asyncio

import pytest

from rubricforge.config import load_config
from rubricforge.llm import LLMClient
from rubricforge.rewards.scorer import RewardScorer, Rollout
from support.reward_fixtures import EXAMPLE, ROLLOUT

pytestmark = pytest.mark.slow


def test_embedded_judge_scores_a_rollout_and_rescoring_is_cached(tmp_path):
    cfg = load_config(overrides=["llm.judge.max_tokens=32", f"llm.cache_path={tmp_path / 'cache.sqlite'}"])
    scorer = RewardScorer(cfg, LLMClient(cfg.llm))
    first = asyncio.run(scorer.score(Rollout(EXAMPLE, ROLLOUT)))
    counts = scorer.judge.counts()
    assert counts["calls"]["rubric"] == 3  # one Figure 5 call per criterion
    assert all(0.0 <= v <= 1.0 for v in first["rubric"]["per_criterion"].values())  # the JSON grammar holds
    assert 0.0 <= first["rubric"]["value"] <= 1.0
    citation = first["citation"]["value"]
    unscored = sum(counts["unscored"].values())
    assert (citation is None) == (unscored > 0)  # a failed label is unscored, never a silent 0
    if citation is not None:
        assert 0.0 <= citation <= 1.0 and first["composite"]["value"] is not None

    again = RewardScorer(cfg, LLMClient(cfg.llm))
    second = asyncio.run(again.score(Rollout(EXAMPLE, ROLLOUT)))
    assert second["rubric"] == first["rubric"]
    if not unscored:  # only valid answers are cached: a failed verdict is asked again
        assert second == first
        assert again.judge.client.ledger.summary()["total"].get("requests", 0) == 0
