"""`train hote` end to end on CPU: HOTE's Algorithm 1 over 2 steps with two tiny local Qwen2 policies (solver
and proposer, tests/support/tiny_qwen.py), TRL's GRPOTrainer for both, and a scripted judge (an OpenAI-compatible
server), then a resume from the run directory.

B = 4, G = 2, G' = 2 (so N = 1 combination of k = 3 tasks), no-tool mode. The solver's scripted answers are
good (even rows) or short (odd rows); the proposer writes "first" / "second" tasks. Judge: real rubrics c1
(w 1) pass only good answers, c2 (w 0.5) every answer; the meta answer has 6 rubrics (5 kept): Meta 1, 4, 5
pass good answers, Meta 2 good answers to the "first" task only, Meta 3 every answer. By hand:
step 1 rewards 1 (good) and 0.5/1.5 (short); step 2 synthetic rewards: first task 5/5 and 1/5, second
task 4/5 and 1/5; Eq. 5: first (0.5+0.5+0+0.5+0.5)/5 = 0.4, second (0.5+0+0+0.5+0.5)/5 = 0.3.
"""

from __future__ import annotations

import json

import pytest
import torch

from rubricforge.config import Config
from rubricforge.testing import FakeOpenAI
from support.hote_loop import JUDGE, data, hote_cfg, start, turn
from support.training_fakes import ScriptedPolicy


def test_two_hote_steps_then_a_resume(tiny_model, tmp_path):
    dataset = data(tmp_path)
    with FakeOpenAI(stages=JUDGE) as server:
        run = start(hote_cfg(tmp_path, server, steps=2), dataset, tiny_model)
        before = {n: p.detach().clone() for n, p in run.proposer.model.named_parameters()}
        step1, step2 = run.train()
        batch3 = run.batch(3)
        state = json.loads((tmp_path / "run" / "hote" / "state.json").read_text())

        # step 1: the B = 4 real tasks, every one in no-tool mode; rewards by hand
        assert sorted(step1.real) == ["t0", "t1", "t2", "t3"] and step1.synthetic == []
        assert set(step1.modes.values()) == {"no_tool"}
        for values in step1.rewards.values():
            assert values == pytest.approx([1.0, 0.5 / 1.5])
        assert step1.proposer_rewards == []  # nothing proposed yet
        assert step1.judge_calls == {"update": 4, "rubric": 16, "meta": 1}
        # step 2: the 2 proposals of step 1 (persistent = the 5 kept meta rubrics) + 2 real tasks
        assert step2.synthetic == ["syn1-1-1", "syn1-1-2"] and len(step2.real) == 2
        logged = [json.loads(line) for line in (tmp_path / "run" / "hote" / "steps.jsonl").read_text().splitlines()]
        assert [r["step"] for r in logged] == [1, 2] and logged[1]["synthetic"] == step2.synthetic
        first, second = logged[1]["rewards"]["syn1-1-1"], logged[1]["rewards"]["syn1-1-2"]
        assert first == pytest.approx([1.0, 0.2]) and second == pytest.approx([0.8, 0.2])
        assert step2.proposer_rewards == pytest.approx([0.4, 0.3])  # Eq. 5 from step 2's judgments
        assert step2.judge_calls == {"update": 4, "rubric": 2 * 2 * 5 + 2 * 2 * 2, "meta": 1}
        assert "syn1-1-1" not in run.bank.tasks  # solved and rewarded: dropped from the bank
        syn = run.bank.tasks["syn2-1-1"]  # step 2's proposal, to be solved at step 3
        assert [(m.id, m.title) for m in syn.persistent] == [(f"m2-1-{i}", f"Meta {i}") for i in range(1, 6)]
        assert syn.query == "The first new task: how do glaciers shape valleys?"
        assert (tmp_path / "run" / "hote" / "solver" / "checkpoint-2").is_dir()
        assert (tmp_path / "run" / "hote" / "proposer" / "checkpoint-1").is_dir()
        # TRL trained on these rewards: the solver's group means, the proposer's one step (on step 1's proposals)
        solver_logged = [h["reward"] for h in run.solver.state.log_history if "reward" in h]
        assert solver_logged == pytest.approx([2 / 3, (2 / 3 + 2 / 3 + 0.6 + 0.5) / 4])
        assert [h["reward"] for h in run.proposer.state.log_history if "reward" in h] == pytest.approx([0.35])
        assert any(not torch.equal(before[n], p) for n, p in run.proposer.model.named_parameters())
        assert state["step"] == 2 and [s["id"] for s in state["synthetic"]] == ["syn2-1-1", "syn2-1-2"]
        assert len(state["generation"][1]) == 2  # the held proposer generation (completion ids)

        # a new process on the same run directory resumes with identical inputs and runs step 3
        resumed = start(hote_cfg(tmp_path, server, steps=3), dataset, tiny_model)
        assert resumed.load() and resumed.step == 2
        assert resumed.batch(3) == batch3 and resumed.bank.state_dict() == run.bank.state_dict()
        (step3,) = resumed.train()
    assert step3.step == 3 and step3.synthetic == ["syn2-1-1", "syn2-1-2"]
    assert step3.proposer_rewards == pytest.approx([0.4, 0.3])  # the held step, rewarded at step 3
    assert resumed.proposer.state.global_step == 2 and resumed.solver.state.global_step == 3
    assert (tmp_path / "run" / "hote" / "solver" / "final" / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_hybrid_hote_step_gives_tools_to_half_the_tasks(small_index_cfg, tiny_model, tmp_path):
    """Step 2 of `hote.modes=hote` with one no-tool step: the 2 real tasks split one tool / one no-tool, the
    synthetic group has one mode (with N = 1 group, round(0.5) = 0 groups get tools); tool rows render the
    search schema and call it over the real index; every response is scored."""
    from support.training_fakes import scripted_turn

    def hybrid_turn(context: str, row: int) -> str:
        return turn(context, row) if "# Tools" not in context or "<weaknesses>" in context else scripted_turn(context, row)

    with FakeOpenAI(stages=JUDGE) as server:
        data_cfg = hote_cfg(tmp_path, server, steps=2).model_dump(mode="json")
        data_cfg["evolve"].update(no_tool_steps=1)
        data_cfg["hote"].update(modes="hote")
        data_cfg["tools"] = {**small_index_cfg.tools.model_dump(mode="json"), "top_k": 2, "snippet_chars": 200}
        data_cfg["corpus"] = small_index_cfg.corpus.model_dump(mode="json")
        data_cfg["embedding"] = small_index_cfg.embedding.model_dump(mode="json")
        from rubricforge.training.hote import HoteRun

        run = HoteRun(Config.model_validate(data_cfg), data(tmp_path), str(tiny_model))
        run.build()
        prompts = []
        for trainer in (run.solver, run.proposer):
            policy = ScriptedPolicy(trainer.model, trainer.processing_class, hybrid_turn)
            force = policy.turn
            policy.turn = lambda context, row, force=force: prompts.append(context) or force(context, row)
        step1, step2 = run.train()
    assert set(step1.modes.values()) == {"no_tool"}
    real_modes = sorted(step2.modes[t] for t in step2.real)
    assert real_modes == ["no_tool", "tool"]  # round(0.5 x 2) real tasks with tools
    assert len({step2.modes[t] for t in step2.synthetic}) == 1  # one proposer group, one mode
    assert any('"name": "search"' in p and "<tool_response>" in p for p in prompts)  # a real search ran
    assert all(v is not None for values in step2.rewards.values() for v in values)


def test_a_failed_meta_call_skips_the_steps_proposing_instead_of_crashing(tiny_model, tmp_path, monkeypatch):
    """B = 8, G' = 2: N = 2 combinations per step. At step 1 the judge answers one combination's meta prompt (and
    its re-prompts) with invalid JSON: the proposer's batch (N x G' rows) is fixed, so that step proposes nothing,
    step 2 solves 8 real tasks, and step 2 proposes again from both combinations; a resume then finds the
    proposer's checkpoint by its update count (one fewer than the steps before)."""
    import support.hote_loop as loop

    monkeypatch.setattr(loop, "QUERIES", loop.QUERIES + ["Why is the sky blue?", "How do vaccines train immunity?",
                                                         "What makes rivers meander?", "How do birds migrate?"])
    doomed: dict[str, str] = {}

    def meta(body) -> str:  # the first meta prompt to arrive fails, with every re-prompt of it
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return "I would rather not." if doomed.setdefault("prompt", prompt) == prompt else JUDGE["hote_meta"]

    with FakeOpenAI(stages={**JUDGE, "hote_meta": meta}) as server:
        cfg = hote_cfg(tmp_path, server, steps=2).model_dump(mode="json")
        cfg["hote"].update(batch_size=8, proposer_grpo_args={"per_device_train_batch_size": 4})
        cfg["train"]["grpo_args"]["per_device_train_batch_size"] = 16
        dataset = loop.data(tmp_path)
        run = start(Config.model_validate(cfg), dataset, tiny_model)
        step1, step2 = run.train()
        cfg["hote"]["steps"] = 3  # a resume: the proposer has made no update yet (nothing to reward at step 2)
        (step3,) = start(Config.model_validate(cfg), dataset, tiny_model).train()
    assert len(step1.meta_failed) == 1 and step1.judge_calls["meta"] == 2
    assert step2.synthetic == [] and len(step2.real) == 8 and step2.proposer_rewards == []
    assert step2.meta_failed == [] and len(run.synthetic) == 4  # both combinations proposed at step 2
    logged = [json.loads(line) for line in (tmp_path / "run" / "hote" / "steps.jsonl").read_text().splitlines()]
    assert [r["meta_failed"] for r in logged] == [step1.meta_failed, [], []]
    assert len(step3.synthetic) == 4 and len(step3.proposer_rewards) == 4  # step 2's proposals, rewarded
