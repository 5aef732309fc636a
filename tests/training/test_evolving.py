"""Training that adapts (issue 12), values worked by hand (docs/methods.md): HOTE Eq. 2 (H-1), the active-rubric
update, duplicates and pruning (H-2), hybrid batch composition (H-6), MindDR's scheduler wiring (M-2) and
difficulty weights (M-3); rubrics without ``type`` read everywhere. The judge is a scripted OpenAI-compatible
server reached through the real litellm backend."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from rubricforge.config import load_config
from rubricforge.errors import UserError
from rubricforge.llm import LLMClient
from rubricforge.rewards.hote.rubric_reward import hote_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.deeprubric.rubric_reward import criteria_from, criterion_text
from rubricforge.rewards.scorer import RewardScorer, Rollout
from rubricforge.rubric_gen.bank import RubricBank, RubricItem, TaskRubrics, prune, update_active
from rubricforge.testing import FakeOpenAI, Reply
from rubricforge.training.adaptive import DifficultyWeights, step_modes
from support.llm_fakes import litellm_llm_config

QUESTION = "What limits the range of electric cars in winter?"
GOOD, OTHER = "Cold batteries lose capacity and cabin heating draws power.", "Winter is cold."
RUBRICS = [  # HOTE Eq. 2 worked by hand: P1, P2 persistent; A1, N1 active
    {"id": "P1", "title": "Battery chemistry", "description": "Explains the battery's capacity loss in cold.", "weight": 1},
    {"id": "P2", "title": "Heating load", "description": "Mentions cabin heating.", "weight": 0.5},
    {"id": "A1", "title": "Numbers", "description": "Gives a typical range loss in percent.", "weight": 1},
    {"id": "N1", "title": "Padding", "description": "Repeats the question instead of answering.", "weight": -1},
]
VERDICTS = {GOOD: {"P1": 1, "P2": 1, "A1": 0, "N1": 1}, OTHER: {"P1": 1, "P2": 0, "A1": 1, "N1": 0}}


def _cfg(tmp_path, server, **sections):
    return load_config(overrides={"llm": litellm_llm_config(tmp_path, server, max_retries=0, structured_retries=0),
                                  "run_dir": str(tmp_path / "run"), **sections})


def binary_judge(fail: set[str] = frozenset()):
    def respond(body):
        user = body["messages"][-1]["content"]
        answer = re.search(r"<response>(.*?)</response>", user, re.S).group(1)
        rubric = re.search(r"<rubric>(.*?)</rubric>", user, re.S).group(1)
        rid = next(r["id"] for r in RUBRICS if r["description"] in rubric)
        if rid in fail:
            return Reply(status=500, error="judge down")
        return Reply(json.dumps({"score": VERDICTS[answer][rid]}))
    return respond


# ---------------------------------------------------------------- H-1: Eq. 2

def test_eq2_exact_values(tmp_path):
    with FakeOpenAI(responder=binary_judge()) as server:
        judge = Judge(LLMClient(_cfg(tmp_path, server).llm))
        criteria = criteria_from(RUBRICS)
        good = asyncio.run(hote_reward(judge, QUESTION, GOOD, criteria))
        other = asyncio.run(hote_reward(judge, QUESTION, OTHER, criteria))
        calls = server.n_requests
        empty = asyncio.run(hote_reward(judge, QUESTION, "  ", criteria))
        assert server.n_requests == calls  # no final answer: no judge call
    assert good.value == pytest.approx(1 / 7) and round(good.value, 6) == 0.142857
    assert other.value == pytest.approx(4 / 7) and round(other.value, 6) == 0.571429
    assert good.per_rubric == VERDICTS[GOOD]
    assert empty.value == 0.0 and set(empty.per_rubric.values()) == {0}
    # the negative rubric is marked for the judge, so J = 1 means "the flaw is there"
    rubric_lines = [re.search(r"<rubric>(.*?)</rubric>", r["messages"][-1]["content"]).group(1) for r in server.requests]
    assert sum(line.startswith("[negative") for line in rubric_lines) == 2  # N1, once per answer


def test_eq2_judge_failure_is_unscored_not_zero(tmp_path):
    with FakeOpenAI(responder=binary_judge(fail={"N1"})) as server:
        judge = Judge(LLMClient(_cfg(tmp_path, server).llm))
        got = asyncio.run(hote_reward(judge, QUESTION, GOOD, criteria_from(RUBRICS)))
    assert got.value is None and got.per_rubric["N1"] is None and got.unscored == 1


def test_scorer_hote_reward_reads_rubrics_without_type(tmp_path):
    rubrics = [{k: v for k, v in r.items() if k != "id"} for r in RUBRICS]  # DR Tulu's {title, description, weight}
    example = {"id": "t1", "question": QUESTION, "rubrics": rubrics}
    with FakeOpenAI(responder=binary_judge()) as server:
        scorer = RewardScorer(_cfg(tmp_path, server), LLMClient(_cfg(tmp_path, server).llm))
        value = asyncio.run(scorer.component("hote", Rollout(example, f"<think>x</think><answer>{OTHER}</answer>")))
    assert value == pytest.approx(4 / 7)


# ---------------------------------------------------------------- rubrics without `type` (finding 2)

def test_rubrics_in_title_description_weight_form_are_criteria():
    got = criteria_from([{"title": "Coverage", "description": "Covers both causes.", "weight": 2},
                         {"criterion": "Cites a source", "points": -1},  # HealthBench's names
                         {"title": "Only a title", "weight": 1}])
    assert [(c.id, c.type, c.weight) for c in got] == [("c1", None, 2.0), ("c2", None, -1.0), ("c3", None, 1.0)]
    assert got[1].description == "Cites a source" and got[2].description == "Only a title"
    assert criterion_text(got[0]) == "ID: c1\nTitle: Coverage\nDescription: Covers both causes."
    with pytest.raises(UserError, match=r"rubrics\[0\].*no weight"):
        criteria_from([{"title": "x", "description": "y"}])


def test_rubric_reward_scores_title_form_rubrics(tmp_path):
    def judge(body):
        assert "Type:" not in body["messages"][-1]["content"]
        return Reply(json.dumps({"score": 2}))

    example = {"id": "t1", "question": QUESTION,
               "rubrics": [{"title": "Coverage", "description": "Covers both causes.", "weight": 1}]}
    with FakeOpenAI(responder=judge) as server:
        scorer = RewardScorer(_cfg(tmp_path, server), LLMClient(_cfg(tmp_path, server).llm))
        value = asyncio.run(scorer.component("rubric", Rollout(example, f"<answer>{GOOD}</answer>")))
    assert value == 0.5


# ---------------------------------------------------------------- H-2: update, duplicates, pruning

def _task() -> TaskRubrics:
    return TaskRubrics(task_id="t1", query=QUESTION, persistent=[
        RubricItem(id="P1", title="Coverage", description="Covers the main causes.", weight=1)])


def _update(tmp_path, reply: Reply, tr: TaskRubrics, step: int = 1):
    with FakeOpenAI([reply]) as server:
        client = LLMClient(_cfg(tmp_path, server).llm)
        got = asyncio.run(update_active(client, tr, [GOOD, OTHER], step))
        return got, server


def test_update_adds_a_positive_and_a_negative_rubric(tmp_path):
    tr = _task()
    got, server = _update(tmp_path, Reply(json.dumps({
        "positive_rubrics": [{"title": "Edge cases", "description": "Discusses pre-conditioning."}],
        "negative_rubrics": [{"title": "Fabricated citation", "description": "Cites a source that is not real."}]})), tr)
    assert [(a.title, a.weight, a.origin) for a in tr.active] == [("Edge cases", 1.0, "evolved"),
                                                                   ("Fabricated citation", -1.0, "evolved")]
    assert len(tr.scored()) == 3 and len(got.positive) == 1 and len(got.negative) == 1
    user = server.requests[0]["messages"][-1]["content"]
    assert "[P1] (weight +1) Coverage" in user and f"<response n=2>\n{OTHER}" in user


def test_update_rejects_a_duplicate_title(tmp_path):
    tr = _task()
    got, _ = _update(tmp_path, Reply(json.dumps({"positive_rubrics": [{"title": "coverage ", "description": "new"}]})), tr)
    assert tr.active == [] and got.duplicates == 1


def test_update_rejects_a_title_that_restates_a_dataset_criterion(tmp_path):
    """What the embedded judge did in benchmarks/grpo_cpu.py: a dataset criterion has only a description, and the
    judge proposed it back as the title of a "new" rubric with a long description of its own."""
    tr = TaskRubrics(task_id="t2", query=QUESTION, persistent=[
        RubricItem(id="c1", title="", description="States that Seurat painted it between 1884 and 1886.", weight=1)])
    got, _ = _update(tmp_path, Reply(json.dumps({"positive_rubrics": [
        {"title": "States that Seurat painted it between 1884 and 1886", "description": "This rubric checks if the "
         "response provides a specific date range for the painting."}]})), tr)
    assert tr.active == [] and got.duplicates == 1


def test_update_rejects_an_embedding_near_duplicate(tmp_path):
    import numpy as np

    def embed(texts):  # the first text is the proposal; pretend it is nearly the existing rubric
        v = np.array([[1.0, 0.0], [0.95, 0.312]])
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    tr = _task()
    with FakeOpenAI([Reply(json.dumps({"positive_rubrics": [{"title": "Breadth", "description": "Covers causes."}]}))]) as s:
        got = asyncio.run(update_active(LLMClient(_cfg(tmp_path, s).llm), tr, [GOOD], 1, embed=embed))
    assert tr.active == [] and got.duplicates == 1


def test_prune_zero_spread_then_cap_keeping_the_largest_spread():
    tr = _task()
    tr.active = [RubricItem(id=i, title=i, description=i, weight=1, origin="evolved", created_step=1)
                 for i in ("A1", "A2", "A3")]
    got = prune(tr, {"P1": [1, 1, 1, 1], "A1": [1, 1, 1, 1], "A2": [1, 0, 1, 0], "A3": [1, 0, 0, 0]}, max_active=1)
    assert [a.id for a in tr.active] == ["A2"] and [a.id for a in tr.inactive] == ["A1", "A3"]
    assert [p.id for p in tr.persistent] == ["P1"]  # never pruned, though its spread is 0
    assert got.zero_std == ["A1"] and got.cap == ["A3"]


def test_failed_update_leaves_the_bank_unchanged_and_is_counted(tmp_path):
    bank = RubricBank()
    tr = bank.task("t1", QUESTION, criteria_from([{"title": "Coverage", "description": "d", "weight": 1}]))
    before = bank.state_dict()["tasks"]
    with FakeOpenAI([Reply(status=500, error="down")]) as server:
        got = asyncio.run(bank.update(LLMClient(_cfg(tmp_path, server).llm), {"t1": [GOOD]}, step=1))
    assert got["t1"].failed and bank.update_failed == 1
    assert bank.state_dict()["tasks"] == before and tr.active == []


def test_saved_bank_resumes_with_identical_judge_inputs(tmp_path):
    reply = Reply(json.dumps({"positive_rubrics": [{"title": "Edge cases", "description": "Pre-conditioning."}]}))
    bank = RubricBank()
    bank.task("t1", QUESTION, criteria_from([{"title": "Coverage", "description": "d", "weight": 1}]))
    with FakeOpenAI([reply]) as server:
        asyncio.run(bank.update(LLMClient(_cfg(tmp_path, server).llm), {"t1": [GOOD, OTHER]}, step=1))
    bank.save(tmp_path / "bank.json")
    resumed = RubricBank()
    resumed.load(tmp_path / "bank.json")
    assert resumed.state_dict() == bank.state_dict()
    prompts = []
    for b in (bank, resumed):  # step 2 of the original and of the resumed run send the same request
        with FakeOpenAI([Reply("{}")]) as server:
            asyncio.run(b.update(LLMClient(_cfg(tmp_path / str(id(b)), server).llm), {"t1": [GOOD, OTHER]}, step=2))
        prompts.append(server.requests[0]["messages"])
    assert prompts[0] == prompts[1] and "Edge cases" in prompts[0][-1]["content"]


# ---------------------------------------------------------------- H-6: hybrid batches

def test_hybrid_step_puts_exactly_half_of_48_tasks_in_tool_mode():
    ids = [f"task-{i}" for i in range(48)]
    modes = step_modes([t for t in ids for _ in range(8)], step=601, modes="hote", no_tool_steps=600)
    assert sum(m == "tool" for m in modes.values()) == 24 and len(modes) == 48
    assert step_modes(ids, 601, "hote", 600) == modes  # the same on every process
    assert step_modes(ids, 602, "hote", 600) != modes  # a new draw per step
    for step in (1, 300, 600):
        assert set(step_modes(ids, step, "hote", 600).values()) == {"no_tool"}


# ---------------------------------------------------------------- M-3: difficulty weights

def test_difficulty_weights_follow_the_accuracy_band():
    w = DifficultyWeights(["easy", "medium", "hard"], band=(0.1, 0.5))
    got = w.update(10, {"easy": 0.80, "medium": 0.30, "hard": 0.05})
    assert got == pytest.approx({"easy": 0.25, "medium": 0.50, "hard": 0.25})


# ---------------------------------------------------------------- M-2: the scheduler stepped by training

class LoopTrainer:
    """What StepHooks uses of a GRPOTrainer: its reward event loop (on a thread), log_metric, the processes."""

    def __init__(self):
        import threading
        from types import SimpleNamespace

        self.async_loop = asyncio.new_event_loop()
        threading.Thread(target=self.async_loop.run_forever, daemon=True).start()
        self.accelerator = SimpleNamespace(is_main_process=True, num_processes=1)
        self.metrics: dict[str, list[float]] = {}

    def _log_metric(self, name, value):
        self.metrics.setdefault(name, []).append(value)

    def score(self, scorer, rollout):
        return asyncio.run_coroutine_threadsafe(scorer.details("search_rl", rollout), self.async_loop).result()


def test_scheduler_is_stepped_by_training_metrics_and_resumes(tmp_path):
    from support.reward_fixtures import EXAMPLE, ROLLOUT

    from rubricforge.rewards.minddr.search_rl import CoefficientScheduler
    from rubricforge.training.adaptive import StepHooks
    from rubricforge.training.trl_seams import STATE_FILE

    orm = Reply(json.dumps({"rationale": "right", "correct": 1}))
    trainer = LoopTrainer()
    with FakeOpenAI([orm]) as server:
        cfg = _cfg(tmp_path, server)
        scorer = RewardScorer(cfg, LLMClient(cfg.llm))
        scorer.scheduler = CoefficientScheduler(patience=1)
        hooks = StepHooks(cfg, scorer, scorer.judge.client, "search_rl")
        rollout = "Stray text. " + ROLLOUT  # tool calls succeed, the first step's format does not
        step1 = trainer.score(scorer, Rollout(EXAMPLE, rollout))
        hooks.after_rewards(trainer, [EXAMPLE], [rollout], step=1)  # tool_success_rate 1.0 >= 0.9, format 0.5
        step2 = trainer.score(scorer, Rollout(EXAMPLE, rollout))  # the same rollout, scored again
    assert step1["weights"] == {"tool": 0.6, "format": 0.3, "prm": 0.1, "orm": 0.0}
    assert step2["weights"] == {"tool": 0.2, "format": 0.3, "prm": 0.5, "orm": 0.0}
    assert trainer.metrics["search_rl/lambda_prm"] == [0.5] and trainer.metrics["search_rl/transitions"] == [1.0]
    assert scorer.scheduler.transitions[0]["step"] == 1
    hooks.save(tmp_path / "checkpoint-1" / STATE_FILE)
    with FakeOpenAI([orm]) as server:
        cfg = _cfg(tmp_path, server)
        resumed = RewardScorer(cfg, LLMClient(cfg.llm))
        StepHooks(cfg, resumed, resumed.judge.client, "search_rl").load(tmp_path / "checkpoint-1" / STATE_FILE)
    assert resumed.scheduler.weights == scorer.scheduler.weights
    assert resumed.scheduler.state_dict() == scorer.scheduler.state_dict()


def test_orm_votes_come_from_each_configured_judge_role(tmp_path):
    from support.reward_fixtures import EXAMPLE, ROLLOUT

    def vote(body):
        return Reply(json.dumps({"rationale": "r", "correct": 0 if body["model"].endswith("b") else 1}))

    with FakeOpenAI(responder=vote) as server:
        llm = litellm_llm_config(tmp_path, server)
        llm["verifier"] = {**llm["verifier"], "model": "openai/fake-b"}
        cfg = load_config(overrides={"llm": llm, "reward": {"orm_roles": ["judge", "verifier", "generator"]}})
        scorer = RewardScorer(cfg, LLMClient(cfg.llm))
        got = asyncio.run(scorer.details("orm", Rollout(EXAMPLE, ROLLOUT)))
    assert sorted(r["model"] for r in server.requests) == ["fake-b", "fake-model", "fake-model"]
    assert got["votes"] == [1, 0, 1] and got["value"] == 1.0


def test_difficulty_sampler_draws_bins_by_weight_in_whole_groups():
    from rubricforge.training.trl_seams import difficulty_sampler

    bins = ["easy"] * 10 + ["medium"] * 10 + ["hard"] * 10
    weights = DifficultyWeights(["easy", "medium", "hard"])
    weights.weights = {"easy": 0.25, "medium": 0.5, "hard": 0.25}
    sampler = difficulty_sampler(list(range(30)), weights, bins, mini_repeat_count=4, batch_size=2, repeat_count=1, seed=0)
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 15 * 2 * 4
    assert all(len(set(drawn[i:i + 4])) == 1 for i in range(0, len(drawn), 4))  # each prompt G times in a row
    draws = [bins[i] for seed in range(40)
             for i in list(difficulty_sampler(list(range(30)), weights, bins, 4, 2, 1, seed))[::4]]  # 1,200 prompts
    share = {b: draws.count(b) / len(draws) for b in ("easy", "medium", "hard")}
    assert share["medium"] == pytest.approx(0.5, abs=0.05) and share["easy"] == pytest.approx(0.25, abs=0.05)
    assert list(difficulty_sampler(list(range(30)), weights, bins, 4, 2, 1, 0)) == drawn  # same seed, same draws


def test_no_tool_rows_leave_the_tool_rewards_out(tmp_path):
    from support.reward_fixtures import EXAMPLE

    answer = "<think>I know this.</think>\n<answer>It is 330 metres tall and was completed in 1889.</answer>"
    with FakeOpenAI(responder=lambda body: Reply(json.dumps({"score": 4}))) as server:
        cfg = _cfg(tmp_path, server)
        scorer = RewardScorer(cfg, LLMClient(cfg.llm))
        no_tool = asyncio.run(scorer.details("composite", Rollout({**EXAMPLE, "environment": "no_tool"}, answer)))
        fmt = asyncio.run(scorer.details("format", Rollout({**EXAMPLE, "environment": "no_tool"}, answer)))
        tool = asyncio.run(scorer.details("composite", Rollout(EXAMPLE, answer)))
    # no citation / search terms; format over answer + think only
    assert set(no_tool["components"]) == {"rubric", "format"} and fmt["components"] == {"answer": 1.0, "think": 1.0}
    assert fmt["value"] == 1.0
    rubric = no_tool["components"]["rubric"]
    assert no_tool["value"] == pytest.approx((0.5 * rubric + 0.2 * 1.0) / 0.7)  # rescaled to the full range
    assert set(tool["components"]) == {"rubric", "format", "citation", "search"} and tool["components"]["search"] == 0.0


def test_evolving_rubrics_need_a_reward_judged_per_rubric(tmp_path):
    from rubricforge.training.adaptive import StepHooks

    cfg = load_config(overrides={"evolve": {"rubrics": "evolving"}, "llm": {"cache_path": ""}})
    with pytest.raises(UserError, match="evolve.rubrics=evolving needs a reward judged per rubric, not 'search_rl'"):
        StepHooks(cfg, None, None, "search_rl")


@pytest.mark.parametrize("args, needles", [
    (["--rubrics", "evolving", "--set", "train.reward=search_rl"], ["evolve.rubrics=evolving", "train.reward"]),
    (["--modes", "sometimes"], ["evolve.modes"]),
    (["--rubrics", "evolving", "--set", "evolve.max_active=-1"], ["evolve.max_active"]),
])
def test_train_grpo_adaptive_flags_fail_in_one_line(args, needles):
    from support.cli import assert_user_error, cli

    data = "tests/data/training/examples.jsonl"
    assert_user_error(cli("train", "grpo", "-d", data, "-m", "no-such-model", *args), *needles)


def test_from_gguf_names_a_missing_file():
    from support.cli import assert_user_error, cli

    assert_user_error(cli("train", "from-gguf", "--out", "x", "--gguf", "no-such.gguf"), "no-such.gguf", "--gguf")


def test_from_gguf_converts_the_embedded_0_5b_model_by_default(monkeypatch, tmp_path):
    """Not the LLM roles' default model (the 1.5B): the help and docs/grpo.md promise the 0.5B policy."""
    from typer.testing import CliRunner

    from rubricforge.cli import app

    asked: list[str] = []
    monkeypatch.setattr("rubricforge.llm.local_model.ensure_model",
                        lambda model_dir, name: asked.append(name) or tmp_path / f"{name}.gguf")
    monkeypatch.setattr("rubricforge.training.model.gguf_to_transformers", lambda gguf, out: out)
    res = CliRunner().invoke(app, ["train", "from-gguf", "--out", str(tmp_path / "policy")])
    assert res.exit_code == 0, res.output
    assert asked == ["qwen2.5-coder-0.5b-instruct-q4"]


def test_dapo_dynamic_sampling_masks_groups_whose_rewards_are_all_equal():
    import torch

    from rubricforge.training.trl_seams import drop_flat_groups

    out = {"advantages": torch.tensor([0.7, -0.7, 0.0, 0.0, 0.0, 0.0]),
           "completion_mask": torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 0, 0]])}
    kept, dropped, removed = drop_flat_groups(out, 2)
    assert (dropped, removed) == (2, 7)
    assert kept["completion_mask"].tolist() == [[1, 1, 0], [1, 1, 1]] + [[0, 0, 0]] * 4
    assert drop_flat_groups(out, 4)[1:] == (0, 0)  # 6 rows are no whole groups of 4: left as they are
