"""The rubric generator's hybrid reward (Prefs Eq. 1; docs/methods.md Q-5, Q-6) with values worked by hand
(docs/methods.md), and `rubricforge train rubric-generator` as one real TRL GRPO step on CPU.

What is real in the GRPO test: a tiny Qwen2 model and tokenizer built locally, TRL's GRPOTrainer, the
hybrid reward through the real LLM client reaching a scripted judge over HTTP (C.2 ratings and C.3
``reward: 3.25``), and the optimiser step. What is scripted: the judge, and the policy's tokens (a
random model writes no JSON): the first completion of the group is App. I's rubric, the second is prose.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricforge.config import Config
from rubricforge.rewards.prefs.hybrid_reward import RubricQuality, hybrid_reward
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.pref_fakes import APP_I, PREFS_JUDGE

QUERY = "Please generate an analysis report on common network failures."
RUBRIC = json.dumps(APP_I)


def _judge(tmp_path, server):
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.judging import Judge

    return Judge(LLMClient(Config.model_validate({"llm": litellm_llm_config(tmp_path, server)}).llm))


def test_rubric_quality_parse():
    assert RubricQuality.from_text("reward: 3.25\nconfidence: 80%\nreason: fine").reward == 3.25
    assert RubricQuality.from_text("**reward**: 4").reward == 4.0
    for bad in ("reward: 4.5", "confidence: 90%"):
        with pytest.raises(ValueError):
            RubricQuality.from_text(bad)


def test_hybrid_reward_exact_values(tmp_path):
    with FakeOpenAI(stages=PREFS_JUDGE) as server:
        judge = _judge(tmp_path, server)
        right = asyncio.run(hybrid_reward(judge, QUERY, RUBRIC, "GOOD report", "weak report"))
        tie = asyncio.run(hybrid_reward(judge, QUERY, RUBRIC, "weak report", "weak report, again"))
        before = server.n_requests
        unreadable = asyncio.run(hybrid_reward(judge, QUERY, "Here are some rubrics: be good.", "GOOD", "weak"))
        weighted = asyncio.run(hybrid_reward(judge, QUERY, RUBRIC, "GOOD report", "weak report", 2.0, 0.5))
        asked = server.n_requests - before
    assert (right.total, right.pref, right.llm, right.fmt) == (4.25, 1, 3.25, 0)  # +1 + 3.25 + 0
    assert right.s_chosen > right.s_rejected
    assert (tie.total, tie.pref) == (2.25, -1) and tie.s_chosen == tie.s_rejected  # a tie is -1: -1 + 3.25
    assert (unreadable.total, unreadable.pref, unreadable.llm, unreadable.fmt) == (-2, -1, 0.0, -1)
    assert weighted.total == 2 * 1 + 0.5 * 3.25
    assert asked == 0  # the unreadable rubric cost no judge call; the weighted one was all cache hits


@pytest.mark.slow
def test_one_grpo_step_of_the_rubric_generator(tmp_path):
    import torch
    from support.tiny_qwen import build_tiny_qwen
    from support.training_fakes import ScriptedPolicy

    from rubricforge.rubric_gen.pref_rubrics import PROMPTS
    from rubricforge.training.rubric_generator import build_rubric_generator

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p1", "query": QUERY, "report_chosen": "GOOD report",
                                 "report_rejected": "weak report", "split": "train"}) + "\n")
    model = build_tiny_qwen(tmp_path / "model", [PROMPTS.render("pref_rubrics.system"), RUBRIC])
    with FakeOpenAI(stages=PREFS_JUDGE) as server:
        cfg = Config.model_validate({
            "run_dir": str(tmp_path / "run"), "llm": litellm_llm_config(tmp_path, server),
            "train": {"preset": "cpu", "output_dir": str(tmp_path / "out"),
                      "grpo_args": {"max_completion_length": 1024, "learning_rate": 1e-3, "seed": 0}}})
        run = build_rubric_generator(cfg, pairs, str(model))
        policy = ScriptedPolicy(run.trainer.model, run.trainer.processing_class,
                                lambda context, row: RUBRIC if row == 0 else "Sorry, I cannot write rubrics.")
        before = {n: p.detach().clone() for n, p in run.trainer.model.named_parameters()}
        metrics = run.train()
        prompts = [m["content"] for r in server.requests for m in r["messages"]]

    assert policy.calls == 1
    # one float per completion: 4.25 (App. I's rubric ranks GOOD above weak, R_llm 3.25) and -2 (unreadable)
    assert metrics["reward"] == pytest.approx((4.25 - 2) / 2)
    assert metrics["reward_std"] == pytest.approx(torch.tensor([4.25, -2.0]).std().item())
    assert metrics["rubric_generator/fmt/mean"] == -0.5 and metrics["rubric_generator/pref/mean"] == 0
    assert metrics["rubric_generator/llm/mean"] == pytest.approx(3.25 / 2)
    assert metrics["rubric_generator/unscored"] == 0
    assert sum("precise and impartial scoring model" in p for p in prompts) == 2 * len(APP_I)
    assert any(not torch.equal(before[n], p) for n, p in run.trainer.model.named_parameters())
    assert (tmp_path / "out" / "model.safetensors").is_file()
