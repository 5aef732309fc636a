"""Generated rubrics as the agent's reward (Prefs §3.4; docs/methods.md Q-8): `rubricforge rubrics generate` writes the
``rubrics`` column once per question (resumable), and the ``pref_rubric`` reward scores a rollout with S(r|y);
the generator and judge are the scripted server of :mod:`pref_fakes`."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

from rubricforge.cli import app
from rubricforge.config import load_config
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.pref_fakes import PREFS_JUDGE


def test_generate_rubrics_then_score_rollouts_with_them(tmp_path):
    from rubricforge.agent.rows import training_rows
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.scorer import RewardScorer, Rollout

    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in
                               enumerate(["Analyse common network failures.", "Analyse common network failures.",
                                          "Compare DNS resolvers."])))
    out = tmp_path / "with_rubrics.jsonl"
    with FakeOpenAI(stages=PREFS_JUDGE, models=["fake-model", "other-model"]) as server:  # both generators
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"),
                                          "llm": litellm_llm_config(tmp_path, server)}))
        args = ["rubrics", "generate", "--dataset", str(dataset), "--out", str(out), "-c", str(config), "-q"]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        assert "3 of 3 rows with rubrics from openai/fake-model (2 generated now" in res.output
        generations = server.n_requests
        res = CliRunner().invoke(app, args)
        assert "(0 generated now" in res.output and server.n_requests == generations  # resumed from the log
        res = CliRunner().invoke(app, [*args, "--set", "llm.generator.model=openai/other-model"])
        assert res.exit_code == 0, res.output  # a new generator makes its own rubrics, not the old one's
        assert "from openai/other-model (2 generated now" in res.output and server.n_requests > generations

        rows = training_rows(out, ["pref_rubric"])  # the columns the reward needs are there
        assert len(rows[0]["rubrics"]) == 13 and rows[0]["rubrics"][0]["type"] == "logical"
        cfg = load_config(config)
        scorer = RewardScorer(cfg, LLMClient(cfg.llm))

        async def score(completion):
            return (await scorer.score(Rollout(rows[0], completion), ("pref_rubric",)))["pref_rubric"]

        good = asyncio.run(score("<think>ok</think>\n<answer>## Report\nA GOOD analysis.</answer>"))
        before = server.n_requests
        silent = asyncio.run(score("<think>I give up.</think>"))
        assert server.n_requests == before
    # App. I: positive weights sum to 34, error weights to -5, Σw = 29
    assert good["value"] == pytest.approx((34 * 8 / 9 - 5 * 3 / 9) / 29) and good["unscored"] == 0
    assert silent["value"] == pytest.approx(-5 / 29)  # no answer: the lowest S the rubric allows, no judge call
