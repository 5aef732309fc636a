"""Training learns what its reward favours: a few GRPO steps of the tiny Qwen2 policy (tests/support/tiny_qwen.py) through
rubricforge's own reward functions and trainer subclasses raise the log-probability of the favoured output,
measured against the same run at learning rate 0 (issue 26 item 2).

Per question the policy writes a favoured and a disfavoured output in every group (``ScriptedPolicy`` forces the
tokens; TRL computes their log-probabilities, advantages and loss as for sampled ones), and the judge — a
scripted OpenAI-compatible server reached over HTTP — scores them. What is measured, independently of TRL, is
the change of log p(favoured | prompt) − log p(disfavoured | prompt), summed over the questions, after the run:

* ``train grpo`` (:func:`~rubricforge.training.grpo.build_grpo`, no-tool mode) with the ``rubric`` reward
  (DeepRubric Eq. 4, one judge call per criterion): the answer that states the year scores 4/4, the other 0/4;
* ``train grpo --rubrics evolving``: the dataset's rubrics score both answers alike; only the rubric the judge
  adds to the bank at step 1 ("Gives the year") tells them apart;
* ``train score``'s rubric selection (the ``ScoreGRPOTrainer`` rows, REINFORCE with Â_e = C − b): a valid selection
  is followed by identical reports (consistency C = 1), an invalid one earns −b.

A run whose reward does not reach the update leaves the margin where the control leaves it; the last test cuts
the reward (every rollout rewarded alike) and checks that the measure then reports no learning.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rubricforge.agent.prompt import no_tool_system_prompt
from rubricforge.config import Config
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config
from support.training_fakes import ScriptedPolicy
from support.training_fakes import DISFAVOURED, FAVOURED, QUESTIONS, log_prob

pytestmark = pytest.mark.slow
STEPS, LR, MIN_GAIN = 2, 3e-3, 1.0  # the trained margin must beat the control's by a nat at least
SCORE_STEPS = 1  # a SCORE step also generates the selections and assesses: one is enough to see the sign


def dataset(tmp_path: Path) -> Path:
    rubric = [{"id": "c1", "title": "Answers", "description": "Answers the question with a date.", "weight": 1.0}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": k, "question": q, "rubrics": rubric}) + "\n" for k, q in QUESTIONS.items()))
    return path


def judge(evolving: bool) -> dict[str, Any]:
    """Update: one positive rubric; criterion judge: 4 for the stated year under the dataset rubric (static run) or
    under the added rubric (evolving run, where the dataset rubric scores every answer 2)."""
    def score(body: dict[str, Any]) -> str:
        user = body["messages"][-1]["content"]
        criterion = re.search(r"<criterion>(.*?)</criterion>", user, re.S).group(1)
        year = "1968" in re.search(r"<response>(.*?)</response>", user, re.S).group(1)
        if "Answers the question" in criterion and evolving:
            return json.dumps({"score": 2})
        return json.dumps({"score": 4 if year else 0})

    return {"evolve_update": json.dumps({"positive_rubrics": [{"title": "Gives the year", "description": "States the year."}],
                                         "negative_rubrics": []}),
            "rubric": score}


def turn(context: str, row: int) -> str:
    return FAVOURED if row % 2 == 0 else DISFAVOURED


def margin(model: Any, tok: Any, prompts: list[list[dict[str, str]]], good: str, bad: str) -> float:
    return sum(log_prob(model, tok, p, good) - log_prob(model, tok, p, bad) for p in prompts)


def learned(gain: float, control: float) -> bool:
    """The check every test applies: the control is unchanged, the trained margin rose by ``MIN_GAIN``."""
    return abs(control) < 1e-4 and gain - control > MIN_GAIN


def grpo_cfg(tmp_path: Path, server: FakeOpenAI, lr: float, evolving: bool) -> Config:
    return Config.model_validate({
        "run_dir": str(tmp_path / f"run-{lr}"), "llm": litellm_llm_config(tmp_path, server),
        "evolve": {"modes": "no_tool", "dedup_cosine": 1.0, "rubrics": "evolving" if evolving else "static",
                   "dynamic_sampling": evolving},  # DAPO's filter on: no group is flat here, so it keeps them all
        "train": {"preset": "cpu", "reward": "rubric", "output_dir": str(tmp_path / f"out-{lr}"),
                  "grpo_args": {"max_steps": STEPS, "learning_rate": lr, "seed": 0, "generation_batch_size": 4,
                                "per_device_train_batch_size": 4, "max_completion_length": 48}}})


def grpo_gain(tmp_path: Path, model: Path, lr: float, evolving: bool) -> float:
    """Train ``STEPS`` steps of ``train grpo`` at ``lr``; the margin's change."""
    from rubricforge.training.grpo import build_grpo

    with FakeOpenAI(stages=judge(evolving)) as server:
        run = build_grpo(grpo_cfg(tmp_path, server, lr, evolving), dataset(tmp_path), str(model))
        trainer, tok = run.trainer, run.trainer.processing_class
        prompts = [[{"role": "system", "content": no_tool_system_prompt()}, {"role": "user", "content": q}]
                   for q in QUESTIONS.values()]
        before = margin(trainer.model, tok, prompts, FAVOURED, DISFAVOURED)
        ScriptedPolicy(trainer.model, tok, turn)
        run.train()
    if evolving:
        bank = json.loads((tmp_path / f"run-{lr}" / "evolve" / "bank.json").read_text())
        assert all([a["title"] for a in t["active"]] == ["Gives the year"] for t in bank["tasks"].values())
        assert [h["dapo/dropped_groups"] for h in trainer.state.log_history if "reward" in h] == [0.0] * STEPS
    return margin(trainer.model, tok, prompts, FAVOURED, DISFAVOURED) - before


@pytest.mark.parametrize("evolving", [False, True], ids=["static-rubrics", "evolving-rubrics"])
def test_grpo_raises_the_answer_its_reward_favours(tiny_model, tmp_path, evolving):
    gain, control = (grpo_gain(tmp_path, tiny_model, lr, evolving) for lr in (LR, 0.0))
    assert learned(gain, control), (gain, control)
    print(f"train grpo ({'evolving' if evolving else 'static'} rubrics): log-prob margin gain {gain:.2f} nats after "
          f"{STEPS} steps (control {control:.2g})")


# ---------------------------------------------------------------- SCORE's rubric selection

VALID = ('<dimensions><dim name="factuality"/><dim name="insight" weight="0.3"/>'
         '<dim name="coherence" weight="0.2"/><dim name="fairness" weight="0.1"/></dimensions>')
INVALID = '<dimensions><dim name="factuality"/><dim name="insight" weight="0.3"/></dimensions>'


def evaluations(prompt: str) -> str:
    """The evaluator's assessment without searching: every report 6/10 on every selected dimension."""
    dims = re.findall(r"^- (\w+) \(", prompt.split("Evaluation dimensions:", 1)[1].split("Process", 1)[0], re.M)
    xml = "".join(f'<report id="{n}"><scores>' + "".join(f'<score dim="{d}" value="6" reason="r"/>' for d in dims)
                  + "</scores></report>" for n in re.findall(r'<report id="(\d+)">', prompt))
    return f"<report_evaluations>{xml}</report_evaluations>"


def score_judge(body: dict[str, Any]) -> Reply:
    return Reply(evaluations(body["messages"][1]["content"]))


def score_turn(context: str, row: int) -> str:
    if "Dimension pool:" in context:  # one selection per query: valid for the film, invalid for the Moon
        return VALID if "2001" in context.split("Query:", 1)[1][:200] else INVALID
    if "Evaluation dimensions:" in context:  # the policy as the assessor (score.assessor=policy)
        return evaluations(context)
    return FAVOURED  # identical reports: every valid selection earns C = 1


def score_gain(tmp_path: Path, model: Path, lr: float, assessor: str = "role") -> tuple[float, Any, list[Any]]:
    """``SCORE_STEPS`` SCORE steps through ``ScoreLoop`` and ``ScoreGRPOTrainer`` (writer without tools, so no index);
    the change of log p(valid selection) − log p(invalid selection) for the film's selection prompt, the loop,
    and the requests the judge server got."""
    from datasets import Dataset

    from rubricforge.agent.rows import training_rows
    from rubricforge.llm import LLMClient
    from rubricforge.training.model import load_tokenizer
    from rubricforge.training.score import PolicyAssessor, ScoreLoop, score_args, score_reward
    from rubricforge.training.trl_seams import score_trainer

    with FakeOpenAI(responder=score_judge) as server:
        cfg = Config.model_validate({
            "run_dir": str(tmp_path / f"score-{lr}"), "llm": litellm_llm_config(tmp_path, server),
            "score": {"harness_every": 100},
            "train": {"preset": "cpu", "output_dir": str(tmp_path / f"score-out-{lr}"),
                      "grpo_args": {"max_steps": SCORE_STEPS, "learning_rate": lr, "seed": 0, "generation_batch_size": 4,
                                    "per_device_train_batch_size": 4, "max_completion_length": 160}}})
        rows = [{**r, "prompt": [{"role": "user", "content": r["question"]}]} for r in training_rows(dataset(tmp_path), [])]
        client = LLMClient(cfg.llm)
        loop = ScoreLoop(cfg, client, None)
        loop.harness.process_constraints.min_number_of_tool_call = 0  # no tools here: the verifier keeps R_s
        trainer = score_trainer(loop, model=str(model), reward_funcs=[score_reward(loop)],
                                args=score_args(cfg),
                                train_dataset=Dataset.from_list(rows), processing_class=load_tokenizer(str(model)))
        tok = trainer.processing_class
        if assessor == "policy":  # as build_score wires it
            loop.judge = PolicyAssessor(trainer.model, tok, cfg.score.temperature, 400)
        prompt = loop.selection_prompts([{"id": "q-film", "question": QUESTIONS["q-film"]}], 1)["q-film"]
        before = margin(trainer.model, tok, [prompt], VALID, INVALID)
        ScriptedPolicy(trainer.model, tok, score_turn)
        try:
            trainer.train()
        finally:
            import asyncio

            asyncio.run_coroutine_threadsafe(client.aclose(), trainer.async_loop).result()
    assert [list(h["invalid"]) for h in loop.history] == [["q-moon"]] * SCORE_STEPS, loop.history[0]["invalid"]
    return margin(trainer.model, tok, [prompt], VALID, INVALID) - before, loop, server.requests


def test_score_raises_the_rubric_selection_its_consistency_reward_favours(tiny_model, tmp_path):
    (gain, _, _), (control, _, _) = (score_gain(tmp_path, tiny_model, lr) for lr in (LR, 0.0))
    assert learned(gain, control), (gain, control)
    print(f"SCORE selection: log-prob margin gain {gain:.2f} nats after {SCORE_STEPS} step (control {control:.2g})")


def test_score_with_the_shared_actor_as_assessor(tiny_model, tmp_path):
    """``score.assessor=policy``: the training weights assess the reports (no judge request); R_s comes from their
    scores, a(r)(1 + Σ w s) with s = 0.6: 1 + 1.6·0.6 for the film's valid selection, 1 + 1.0·0.6 for the Moon's
    default rubric; the selection still learns."""
    gain, loop, requests = score_gain(tmp_path, tiny_model, LR, assessor="policy")
    assert not requests and loop.judge.calls == 2  # one assessment turn per query
    assert sorted(set(loop.current.rewards)) == [pytest.approx(1.6), pytest.approx(1.96)]
    assert gain > MIN_GAIN


# ---------------------------------------------------------------- the measure fails a cut reward

def test_a_reward_cut_from_the_update_shows_no_learning(tiny_model, tmp_path, monkeypatch):
    """A wiring bug that cuts the reward from the update — here the reward adapter rewards every rollout alike —
    must fail the check the tests above apply."""
    import rubricforge.training.grpo as grpo

    real = grpo.grpo_reward

    def cut(scorer, name):
        reward = real(scorer, name)

        async def constant(prompts, completions, **kwargs):
            await reward(prompts, completions, **kwargs)
            return [1.0] * len(completions)

        return constant

    monkeypatch.setattr(grpo, "grpo_reward", cut)
    gain, control = (grpo_gain(tmp_path, tiny_model, lr, False) for lr in (LR, 0.0))
    assert not learned(gain, control), (gain, control)
    assert abs(gain) < 1e-4
