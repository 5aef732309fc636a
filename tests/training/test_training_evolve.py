"""`train grpo` with training that adapts, on CPU with the tiny local Qwen2 model (tests/support/tiny_qwen.py):

* two GRPO steps with an evolving rubric bank and HOTE's Eq. 2 reward: the scripted judge proposes rubrics
  at each step's update; the bank after step 1 holds them, step 2's judge calls and rewards use them, a
  rubric that did not separate step 2's group is pruned to inactive, and the bank file in the run directory
  resumes to the same state;
* one hybrid step with two tasks: TRL's per-example environments give one task the tools (schema rendered,
  a real search call) and the other none (no schema; one think, then the answer), and the composite reward
  leaves citation and search out of the no-tool rows.

Real: the model, TRL's GRPOTrainer and its tool loop, the tools over the FAISS index, the rewards through
the litellm backend, the optimiser. Scripted: the judge (an OpenAI-compatible server) and the policy's tokens
(``training_fakes.ScriptedPolicy``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rubricforge.config import Config
from rubricforge.testing import FakeOpenAI, Reply
from support.paths import EXAMPLES
from support.training_fakes import ScriptedPolicy, LENIENT_JUDGE
from support.training_fakes import train_cfg

pytestmark = pytest.mark.slow
CITES = "Cites a retrieved snippet"


def one_task(tmp_path: Path) -> Path:
    """The first training example, its rubrics in DR Tulu's {title, description, weight} form."""
    row = json.loads(EXAMPLES.read_text().splitlines()[0])
    row["rubrics"] = [{"title": r["description"][:30], "description": r["description"], "weight": r["weight"]}
                      for r in row["rubrics"]]
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


class EvolvingJudge:
    """Step 1's update proposes a positive rubric (citing) and a negative one (vagueness); step 2's proposes a
    rubric every response passes (to be pruned) and repeats step 1's title (a duplicate). Binary verdicts: a
    response with a <cite> passes the persistent rubrics and the citing rubric, one without shows vagueness."""

    def __init__(self):
        self.updates = 0
        self.rubrics_by_step: dict[int, set[str]] = {}

    def stages(self) -> dict[str, object]:
        return {"evolve_update": self.update, "hote": self.verdict}

    def update(self, body) -> Reply:
        self.updates += 1
        if self.updates == 1:
            return Reply(json.dumps({"positive_rubrics": [{"title": CITES, "description": "Backs a claim with a cite."}],
                                     "negative_rubrics": [{"title": "Vague answer", "description": "Gives no specifics."}]}))
        return Reply(json.dumps({"positive_rubrics": [{"title": "names kubrick", "description": "Names Kubrick."},
                                                      {"title": CITES.lower(), "description": "Again."}]}))

    def verdict(self, body) -> Reply:
        user = body["messages"][-1]["content"]
        rubric = re.search(r"<rubric>(.*?)</rubric>", user, re.S).group(1)
        self.rubrics_by_step.setdefault(self.updates, set()).add(rubric)
        cites = "<cite" in user
        if "Names Kubrick" in rubric:
            return Reply(json.dumps({"score": 1}))
        if "Gives no specifics" in rubric:
            return Reply(json.dumps({"score": int(not cites)}))
        return Reply(json.dumps({"score": int(cites)}))


def test_two_grpo_steps_with_an_evolving_bank(small_index_cfg, tiny_model, tmp_path):
    from rubricforge.rubric_gen.bank import RubricBank
    from rubricforge.training.grpo import build_grpo

    judge = EvolvingJudge()
    with FakeOpenAI(stages=judge.stages()) as server:
        cfg = train_cfg(small_index_cfg, tmp_path, server, max_steps=2)
        data = cfg.model_dump(mode="json")
        data["run_dir"] = str(tmp_path / "run")
        data["train"]["reward"] = "hote"
        data["evolve"].update(rubrics="evolving", dedup_cosine=1.0)
        cfg = Config.model_validate(data)
        run = build_grpo(cfg, one_task(tmp_path), str(tiny_model))
        ScriptedPolicy(run.trainer.model, run.trainer.processing_class)
        banks = []
        save = run.hooks.after_rewards

        def after(trainer, inputs, completions, step):  # the bank as it stands after each step
            save(trainer, inputs, completions, step)
            banks.append(json.loads((tmp_path / "run" / "evolve" / "bank.json").read_text()))

        run.hooks.after_rewards = after
        run.train()

    assert run.note.startswith("evolving rubrics: 1 update calls + 1 x 2 responses x 3.0-8.0 rubrics")
    step1, step2 = [h for h in run.trainer.state.log_history if "reward" in h]
    # step 1: the two new rubrics were added, scored (cite: (1+0.8+0.5+1)/4.3; no cite: -1/4.3) and both kept
    t1 = banks[0]["tasks"]["ex-kubrick"]
    assert [(a["title"], a["weight"]) for a in t1["active"]] == [(CITES, 1.0), ("Vague answer", -1.0)]
    assert step1["evolve/new_positive"] == 1 and step1["evolve/new_negative"] == 1
    assert step1["reward"] == pytest.approx((3.3 / 4.3 + -1 / 4.3) / 2)
    assert step1["evolve/reward_persistent"] == pytest.approx((1.0 + 0.0) / 2)  # cite: 2.3/2.3, no cite: 0
    assert step1["evolve/reward_active"] == pytest.approx((0.5 + -0.5) / 2)
    assert step1["evolve/active_mean"] == 2 and step1["evolve/pruned_zero_std"] == 0
    # step 2: the same completions, so step 1's verdicts came from the LLM cache and only the new rubric reached
    # the judge; the duplicate was rejected; "Names Kubrick", passed by every response, carried no signal and
    # went to inactive after scoring
    assert judge.rubrics_by_step[2] == {"names kubrick: Names Kubrick."}
    assert any(CITES in r for r in judge.rubrics_by_step[1])  # step 1 scored after its own update
    assert step2["evolve/duplicates"] == 1 and step2["evolve/new_positive"] == 1
    assert step2["reward"] == pytest.approx((4.3 / 5.3 + 0.0) / 2)  # step 1's rubrics + "Names Kubrick" (w 1)
    assert step2["evolve/reward_active"] == pytest.approx((2 / 3 + 0.0) / 2)
    t2 = banks[1]["tasks"]["ex-kubrick"]
    assert [a["title"] for a in t2["active"]] == [CITES, "Vague answer"]
    assert [a["title"] for a in t2["inactive"]] == ["names kubrick"] and step2["evolve/pruned_zero_std"] == 1
    resumed = RubricBank()
    resumed.load(tmp_path / "run" / "evolve" / "bank.json")
    assert resumed.state_dict() == banks[1]
    state = json.loads((tmp_path / "run" / "evolve" / "state.json").read_text())
    assert state["bank"] == banks[1] and state["scheduler"]["weights"]["tool"] == 0.6


def test_hybrid_step_routes_each_task_to_its_environment(small_index_cfg, tiny_model, tmp_path):
    from rubricforge.training.grpo import build_grpo

    with FakeOpenAI(stages=LENIENT_JUDGE) as server:
        cfg = train_cfg(small_index_cfg, tmp_path, server, generation_batch_size=4, per_device_train_batch_size=4)
        data = cfg.model_dump(mode="json")
        data["evolve"].update(modes="hybrid", tool_share=0.5)
        run = build_grpo(Config.model_validate(data), EXAMPLES, str(tiny_model))
        trainer = run.trainer
        ScriptedPolicy(trainer.model, trainer.processing_class)
        batches = []
        generate_and_score = trainer._generate_and_score_completions

        def capture(inputs):
            out = generate_and_score(inputs)
            batches.append((out, [type(e).__name__ for e in trainer.environments], list(trainer._batch_environments)))
            return out

        trainer._generate_and_score_completions = capture
        metrics = run.train()

    (out, env_types, names), = batches
    tok = trainer.processing_class
    assert sorted(set(names)) == ["no_tool", "tool"] and names.count("tool") == 2  # one group of 2 per mode
    for ids, mask, name, env in zip(out["prompt_ids"], out["prompt_mask"], names, env_types, strict=True):
        prompt = tok.decode([t for t, m in zip(ids.tolist(), mask.tolist(), strict=True) if m])
        assert ('"name": "search"' in prompt) == (name == "tool")
        assert ("No tools are available" in prompt) == (name == "no_tool")
        assert env == {"tool": "ResearchEnvironment", "no_tool": "NoToolEnvironment"}[name]
    for ids, name in zip(out["completion_ids"], names, strict=True):
        text = tok.decode(ids.tolist())
        assert ("<tool_call>" in text) == (name == "tool")
    # the composite left citation and search out of the no-tool rows: its search mean is over tool rows only
    assert metrics["composite/search/mean"] == pytest.approx(1 / 6)
    assert metrics["composite/citation/unscored"] == 0
