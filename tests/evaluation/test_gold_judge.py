"""The gold judge during training (:mod:`rubricforge.evaluation.gold`): the divergence rule on hand-made series, the
refusal of the training judge as gold judge, the held-out split, and (slow, the tiny local Qwen2 policy with a
scripted training judge and a scripted gold judge on separate servers) GRPO whose callback fires at steps N and 2N
and logs both curves, and the callback's warning when the curves part."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import yaml

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.evaluation.gold import diverging, gold_llm, held_out
from rubricforge.evaluation.tasks import report_text
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config
from support.paths import EXAMPLES
from support.training_fakes import LENIENT_JUDGE, ScriptedPolicy



@pytest.mark.parametrize(("train", "gold", "warn"), [
    ([0.40, 0.50, 0.60], [0.70, 0.65, 0.60], True),  # the Rubric Dropout pattern: +0.20 train, -0.10 gold
    ([0.40, 0.50, 0.60], [0.60, 0.65, 0.70], False),  # both rise
    ([0.60, 0.50, 0.40], [0.70, 0.65, 0.60], False),  # both fall
    ([0.40, 0.50, 0.41], [0.70, 0.60, 0.69], False),  # changes within MIN_DELTA (0.01 each) are noise
    ([0.40, 0.60], [0.70, 0.50], False),  # fewer than WINDOW evaluations
    ([0.40, 0.50, 0.60], [0.70, None, 0.60], False),  # an unscored evaluation in the window
    ([0.90, 0.10, 0.40, 0.50, 0.60], [0.10, 0.90, 0.70, 0.65, 0.60], True),  # only the last WINDOW count
    ([0.40, 0.50, 0.60, 0.60], [0.70, 0.65, 0.60, 0.70], False),  # gold recovered: last window 0.5->0.6, 0.65->0.7
])
def test_the_warning_rule_on_hand_made_series(train, gold, warn):
    assert diverging(train, gold) is warn


def _cfg(tmp_path: Path, server: FakeOpenAI, **train) -> Config:
    return Config.model_validate({"run_dir": str(tmp_path / "run"), "llm": litellm_llm_config(tmp_path, server),
                                  "train": train})


def test_the_training_judge_is_refused_as_gold_judge(tmp_path):
    with FakeOpenAI() as server:
        cfg = _cfg(tmp_path, server)
        same = tmp_path / "same.yaml"
        same.write_text(yaml.safe_dump({"llm": cfg.llm.model_dump(mode="json")}))
        with pytest.raises(UserError, match=r"is the training judge \(llm.judge: openai/fake-model via litellm at"):
            gold_llm(cfg.model_copy(update={"train": cfg.train.model_copy(update={"gold_judge": str(same)})}))
        other = tmp_path / "other.yaml"  # the same model behind another endpoint is another judge
        other.write_text(yaml.safe_dump({"llm": {"judge": {**cfg.llm.judge.model_dump(mode="json"),
                                                           "api_base": "http://127.0.0.1:9/v1"}}}))
        gold = gold_llm(cfg.model_copy(update={"train": cfg.train.model_copy(update={"gold_judge": str(other)})}))
        assert gold.judge.api_base == "http://127.0.0.1:9/v1"
    local = Config()  # the embedded judge by name: the same model on the same (local) backend
    with pytest.raises(UserError, match="is the training judge"):
        gold_llm(local.model_copy(update={"train": local.train.model_copy(update={"gold_judge": local.llm.judge.model})}))
    named = gold_llm(local.model_copy(update={"train": local.train.model_copy(update={"gold_judge": "openai/gpt-4o"})}))
    assert (named.judge.backend, named.judge.model) == ("litellm", "openai/gpt-4o")


@pytest.mark.parametrize("command", ["grpo", "hote", "score"])
def test_train_cli_refuses_the_training_judge_in_one_line(tmp_path, command):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run")}))
    proc = subprocess.run([sys.executable, "-m", "rubricforge.cli", "train", command, "--dataset", str(EXAMPLES),
                           "--model", "unused", "--config", str(cfg), "--gold-judge", str(cfg), "--gold-every", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "is the training judge" in proc.stderr


def test_held_out_rows_are_the_split_test_rows_and_leave_training(tmp_path):
    with FakeOpenAI() as server:
        cfg = _cfg(tmp_path, server, gold_judge="openai/another-judge")
        rows = [{"id": "a", "split": "train"}, {"id": "b", "split": "test"}, {"id": "c"}, {"id": "d", "split": "validation"}]
        train, held = held_out(cfg, rows, "ds")
        assert [r["id"] for r in train] == ["a", "c"] and [r["id"] for r in held] == ["b", "d"]
        with pytest.raises(UserError, match="dataset ds has no held-out rows"):
            held_out(cfg, [{"id": "a"}], "ds")
        off = _cfg(tmp_path, server)
        assert held_out(off, rows, "ds") == (rows, [])


def _gold_judge(body) -> Reply:
    """Every criterion 2 of 4: the held-out rubric score is 0.5."""
    assert any("<criterion>" in m["content"] for m in body["messages"])
    return Reply(json.dumps({"score": 2}))


@pytest.mark.slow
def test_grpo_logs_the_gold_curve_at_steps_n_and_2n(tiny_model, tmp_path):
    from rubricforge.training.grpo import build_grpo

    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines()]
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({**r, "split": s}) + "\n" for r, s in zip(rows, ["train", "test"], strict=True)))
    with FakeOpenAI(stages=LENIENT_JUDGE) as judge, FakeOpenAI(responder=_gold_judge) as gold_server:
        gold_cfg = tmp_path / "gold.yaml"
        gold_cfg.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path / "gold", gold_server)}))
        cfg = Config.model_validate({
            "run_dir": str(tmp_path / "run"), "llm": litellm_llm_config(tmp_path, judge),
            "evolve": {"modes": "no_tool"},
            "train": {"preset": "cpu", "output_dir": str(tmp_path / "out"), "gold_judge": str(gold_cfg), "gold_every": 2,
                      "grpo_args": {"max_steps": 4, "max_completion_length": 64, "seed": 0}}})
        run = build_grpo(cfg, dataset, str(tiny_model))
        ScriptedPolicy(run.trainer.model, run.trainer.processing_class)
        run.train()
        gold_requests = len(gold_server.requests)
    history = run.trainer.state.log_history
    evaluated = [h for h in history if "gold/score" in h]
    assert [h["step"] for h in evaluated] == [2, 4]
    assert all(h["gold/score"] == pytest.approx(0.5) and h["gold/unscored"] == 0 for h in evaluated)
    for h in evaluated:  # the training curve beside it: the mean reward logged since the previous evaluation
        window = [x["reward"] for x in history if "reward" in x and h["step"] - 2 < x["step"] <= h["step"]]
        assert h["gold/train_reward"] == pytest.approx(sum(window) / len(window))
    lines = [json.loads(line) for line in (tmp_path / "out" / "gold.jsonl").read_text().splitlines()]
    assert [(r["step"], r["gold"], r["tasks"]) for r in lines] == [(2, 0.5, 1), (4, 0.5, 1)]
    assert "warning" not in lines[-1]
    # the held-out task (2 criteria, one call each) went to the gold judge only, never trained on; the second
    # evaluation's answers were the first's (a scripted policy), so the LLM cache answered them
    assert gold_requests == 2
    # the training judge saw the held-out task only when the probes scored the policy's answer and its three
    # variants with the training reward (2 criteria each, once: the second evaluation's were cached), never in training
    held_question = rows[1]["question"]
    assert sum(any(held_question in m["content"] for m in r["messages"]) for r in judge.requests) == 2 * 4
    assert rows[1]["id"] not in [r["id"] for r in run.trainer.train_dataset]


@pytest.mark.slow
@pytest.mark.parametrize(("rewards", "warns"), [([0.2, 0.4, 0.6], True), ([0.6, 0.4, 0.2], False)])
def test_the_callback_warns_once_the_curves_part(tiny_model, tmp_path, caplog, rewards, warns):
    """The callback on its own, fed a hand-made log history: the gold judge's score falls 1.0, 0.75, 0.5 over three
    evaluations; with a rising training reward the third one warns (a log line and the JSONL), with a falling one not."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM, TrainerState

    from rubricforge.evaluation.gold import gold_callback
    from rubricforge.training.model import greedy_reply, load_tokenizer

    calls = []

    def falling(body) -> Reply:  # 2 criteria per evaluation: 4, 4, then 3, 3, then 2, 2
        calls.append(body)
        return Reply(json.dumps({"score": 4 - (len(calls) - 1) // 2}))

    task = json.loads(EXAMPLES.read_text().splitlines()[1])
    with FakeOpenAI(stages=LENIENT_JUDGE) as judge, FakeOpenAI(responder=falling) as gold_server:
        gold_cfg = tmp_path / "gold.yaml"
        gold_cfg.write_text(yaml.safe_dump({"llm": {**litellm_llm_config(tmp_path, gold_server), "cache_path": ""}}))
        cfg = _cfg(tmp_path, judge, gold_judge=str(gold_cfg), gold_every=1)
        tokenizer = load_tokenizer(str(tiny_model))
        model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
        ScriptedPolicy(model, tokenizer)
        callback = gold_callback(cfg, [task], partial(greedy_reply, tokenizer=tokenizer))
        state, args = TrainerState(), SimpleNamespace(output_dir=str(tmp_path / "out"), max_completion_length=32)
        for step, reward in enumerate(rewards, 1):
            state.global_step = step
            state.log_history.append({"reward": reward, "step": step})
            callback.on_step_end(args, state, None, model=model)
    evaluated = [h for h in state.log_history if "gold/score" in h]
    assert [h["gold/score"] for h in evaluated] == pytest.approx([1.0, 0.75, 0.5])
    assert [h["gold/train_reward"] for h in evaluated] == pytest.approx(rewards)
    lines = [json.loads(line) for line in (tmp_path / "out" / "gold.jsonl").read_text().splitlines()]
    assert ["warning" in line for line in lines] == [False, False, warns]
    warned = [r.getMessage() for r in caplog.records if "held-out gold score fell" in r.getMessage()]
    assert len(warned) == int(warns)
    if warns:
        assert warned[0].startswith("step 3: training reward rose") and "(steps 1-3)" in warned[0]


@pytest.mark.slow
def test_hote_solver_gets_the_gold_curve(tiny_model, tmp_path):
    """One HOTE step (the setting of :mod:`support.hote_loop`) with a fifth task held out (split test): the solver's
    trainer evaluates it with the gold judge at its step 1; the held-out task is none of HOTE's real tasks."""
    from support.hote_loop import JUDGE, data, hote_cfg, start

    dataset = data(tmp_path)
    held = {"id": "held", "question": "How do glaciers carve valleys?", "split": "test",
            "rubrics": [{"id": "g1", "title": "Ice", "description": "Explains erosion by moving ice.", "weight": 1.0}]}
    dataset.write_text(dataset.read_text() + json.dumps(held) + "\n")
    with FakeOpenAI(stages=JUDGE) as server, FakeOpenAI(responder=_gold_judge) as gold_server:
        gold_cfg = tmp_path / "gold.yaml"
        gold_cfg.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path / "gold", gold_server)}))
        base = hote_cfg(tmp_path, server, steps=1)
        cfg = base.model_copy(update={"train": base.train.model_copy(update={"gold_judge": str(gold_cfg),
                                                                             "gold_every": 1})})
        run = start(cfg, dataset, tiny_model)
        (step1,) = run.train()
        assert len(gold_server.requests) == 1
    assert "held" not in step1.real and sorted(step1.real) == ["t0", "t1", "t2", "t3"]
    lines = [json.loads(line) for line in (tmp_path / "run" / "hote" / "solver" / "gold.jsonl").read_text().splitlines()]
    assert [(r["step"], r["gold"], r["tasks"]) for r in lines] == [(1, 0.5, 1)]
    assert lines[0]["train_reward"] is not None


def _by_content(body) -> Reply:
    """A judge (gold or training) that scores a criterion 4 when the answer speaks of erosion in a sentence, else 0."""
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    answer = prompt.rsplit("<response>", 1)[1].split("</response>", 1)[0] if "<response>" in prompt else ""
    return Reply(json.dumps({"score": 4 if "erosion" in answer and "." in answer else 2 if "erosion" in answer else 0}))


GOOD = "<think>Glaciers move.</think>\n<answer>Moving ice plucks and grinds the rock: erosion carves a U-shaped valley.</answer>"
SOUP = "<think>/*think>...</think>\n<answer>/*answer>... glaciers valleys</answer>"


def test_the_callback_fires_on_its_own_count_of_steps_and_warns_at_the_onset(tmp_path, caplog):
    """steps_per_generation = 2: TRL logs `reward` at steps 1, 3, 5, ..., so a callback that waits for a logged reward
    at a multiple of gold_every = 2 never fires. This one counts optimiser steps: it evaluates at 2, 4, 6, 8. The
    policy's answers turn to tag soup after step 4 while the training reward rises: the gold score falls, and the
    keyword-stuffing probe begins to win under the training rubric reward — each warned with its onset. The refusal
    ties the tag soup at 0 from step 6: a tie at nothing is no win (an exact-answer reward would otherwise raise
    the alarm at step 0 whenever the policy is wrong on most questions)."""
    from types import SimpleNamespace

    from transformers import TrainerState

    from rubricforge.evaluation.gold import gold_callback

    task = {"id": "held", "question": "How do glaciers carve valleys?", "split": "test",
            "rubrics": [{"id": "g1", "type": "logical", "description": "Explains erosion by moving ice.", "weight": 1.0}]}
    with FakeOpenAI(responder=_by_content) as judge, FakeOpenAI(responder=_by_content) as gold_server:
        gold_cfg = tmp_path / "gold.yaml"
        gold_cfg.write_text(yaml.safe_dump({"llm": litellm_llm_config(tmp_path / "gold", gold_server)}))
        cfg = Config.model_validate({"run_dir": str(tmp_path / "run"), "llm": litellm_llm_config(tmp_path, judge),
                                     "train": {"gold_judge": str(gold_cfg), "gold_every": 2, "reward": "rubric"}})
        answers = []

        def reply(model, messages, tokens):
            answers.append(GOOD if state.global_step <= 4 else SOUP)
            return answers[-1]

        callback = gold_callback(cfg, [task], reply, "rubric")
        state, args = TrainerState(), SimpleNamespace(output_dir=str(tmp_path / "out"), max_completion_length=32)
        for step in range(1, 9):  # the Trainer's order: the step ends, then (on logging steps) the log
            state.global_step = step
            callback.on_step_end(args, state, None, model=None)
            if step % 2 == 1:
                logs = {"reward": 0.2 * (step + 1) / 2, "step": step}
                state.log_history.append(logs)
                callback.on_log(args, state, None, model=None, logs=logs)
    evaluated = [h for h in state.log_history if "gold/score" in h]
    assert [h["step"] for h in evaluated] == [2, 4, 6, 8] and len(answers) == 4
    assert [h["gold/score"] for h in evaluated] == [1.0, 1.0, 0.0, 0.0]
    assert [h["gold/train_reward"] for h in evaluated] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert [h["probe/refusal"] for h in evaluated] == [0.0, 0.0, 0.0, 0.0]
    assert [h["probe/keyword_stuff"] for h in evaluated] == [0.0, 0.0, 1.0, 1.0]
    lines = [json.loads(line) for line in (tmp_path / "out" / "gold.jsonl").read_text().splitlines()]
    assert [line["probes"]["keyword_stuff"] for line in lines] == [0.0, 0.0, 1.0, 1.0]
    # each task's metrics (the headline first) and the answer scored, so two runs can be compared question by question
    assert [[(t["id"], next(iter(v for k, v in t.items() if k != "id"))) for t in line["per_task"]] for line in lines] == [
        [("held", 1.0)], [("held", 1.0)], [("held", 0.0)], [("held", 0.0)]]
    assert lines[0]["answers"] == [report_text(GOOD)] and lines[2]["answers"] == [report_text(SOUP)]
    assert ["warning" in line for line in lines] == [False, False, True, True]
    assert "probe keyword_stuff began to win at step 6" in lines[2]["warning"]
    assert "probe keyword_stuff" not in lines[3]["warning"]  # said once, at the onset
    assert "(steps 4-8)" in lines[3]["warning"] and "hacking onset: step 4" in lines[3]["warning"]
    warned = [r.getMessage() for r in caplog.records if "hacking onset" in r.getMessage()]
    assert warned[0].startswith("step 6: training reward rose") and "hacking onset: step 2" in warned[0]
    assert any(w.startswith("step 6: probe keyword_stuff began to win") for w in warned)
