"""MindDR's SFT and alignment stages on CPU with the tiny Qwen2 policy: `train dpo` (Eq. 14) and `train self-sft`
(Eq. 15) on the pairs `train dpo-pairs` writes move the policy toward the chosen report, against a learning-rate-0
control; `train sft`'s curriculum orders short trajectories first and its early stop (§5.1) ends training once
the policy's answers are well-formed and the loss has levelled off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubricforge.config import Config
from rubricforge.errors import UserError
from support.training_fakes import DISFAVOURED, FAVOURED, QUESTIONS, log_prob

pytestmark = pytest.mark.slow
CPU = {"bf16": False, "use_cpu": True, "max_steps": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
       "report_to": "none", "save_strategy": "no"}


def pairs(tmp_path: Path) -> Path:
    out = tmp_path / "pairs"
    out.mkdir(exist_ok=True)
    (out / "pairs.jsonl").write_text("".join(json.dumps({
        "id": k, "prompt": [{"role": "user", "content": q}], "chosen": [{"role": "assistant", "content": FAVOURED}],
        "rejected": [{"role": "assistant", "content": DISFAVOURED}], "chosen_reward": 0.9, "rejected_reward": 0.1}) + "\n"
        for k, q in QUESTIONS.items()))
    return out


def change(tmp_path: Path, model: Path, method: str, lr: float) -> tuple[float, float]:
    """(Δ log p(chosen), Δ log p(rejected)) summed over the questions after two steps of ``method`` at ``lr``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricforge.jobs.train import trainer_job
    from rubricforge.training.preference import build_dpo, build_self_sft

    args = {**CPU, "learning_rate": lr, **({"warmup_steps": 0, "max_length": 512} if method == "self-sft" else {})}
    cfg = Config.model_validate({"train": {"output_dir": str(tmp_path / f"{method}-{lr}"),
                                           "dpo_args" if method == "dpo" else "sft_args": args}})
    tok = AutoTokenizer.from_pretrained(model)
    prompts = [[{"role": "user", "content": q}] for q in QUESTIONS.values()]

    def logps(folder: Path) -> tuple[float, float]:
        m = AutoModelForCausalLM.from_pretrained(folder)
        return (sum(log_prob(m, tok, p, FAVOURED) for p in prompts), sum(log_prob(m, tok, p, DISFAVOURED) for p in prompts))

    before = logps(model)
    build = build_dpo if method == "dpo" else build_self_sft
    data = pairs(tmp_path)
    done = trainer_job(cfg, method, build(cfg, data, str(model)), str(model), {"pairs": data})
    assert done.status == "complete" and done.summary.metrics["loss"] == done.summary.metrics["loss"]  # not NaN
    after = logps(Path(done.out))
    return after[0] - before[0], after[1] - before[1]


def test_dpo_widens_the_chosen_over_the_rejected(tiny_model, tmp_path):
    (chosen, rejected), control = change(tmp_path, tiny_model, "dpo", 3e-3), change(tmp_path, tiny_model, "dpo", 0.0)
    assert control == (pytest.approx(0, abs=1e-4), pytest.approx(0, abs=1e-4))
    assert chosen - rejected > 1.0


def test_self_sft_raises_the_chosen_report(tiny_model, tmp_path):
    (chosen, _), control = change(tmp_path, tiny_model, "self-sft", 3e-3), change(tmp_path, tiny_model, "self-sft", 0.0)
    assert control[0] == pytest.approx(0, abs=1e-4) and chosen > 1.0


def test_a_pairs_file_without_rejected_turns_is_named(tmp_path):
    from rubricforge.training.preference import pair_rows

    bad = tmp_path / "pairs.jsonl"
    bad.write_text(json.dumps({"prompt": [{"role": "user", "content": "q"}], "chosen": [{"role": "assistant",
                                                                                       "content": "a"}]}) + "\n")
    with pytest.raises(UserError, match=r"pairs.jsonl:1 lacks a 'prompt', 'chosen' or 'rejected' message list"):
        pair_rows(tmp_path)
    with pytest.raises(UserError, match="not found"):
        pair_rows(tmp_path / "missing")


# ---------------------------------------------------------------- §5.1 curriculum and early stop

TOOL_STEP = ('<think>I should look this up.</think>\n<tool_call>\n{"name": "search", "arguments": {"query": '
             '["Eiffel Tower completion year"]}}\n</tool_call>')


def test_curriculum_mixes_longer_trajectories_in_and_format_errors_and_plateau():
    """MindDR §5.1: "earlier training is dominated by shorter, simpler samples … longer and harder samples are
    gradually introduced" (a mixture, not a sort: the old curriculum ended each epoch on the longest rows only); a
    correct ReAct first step (a parseable tool call) is no format error (the old check wanted a closed answer)."""
    from rubricforge.training.sft import curriculum, format_error, loss_plateau, mixture

    lengths = [1000] * 15 + [20000] * 9 + [100000] * 6  # base, extension (≤ 64K), extreme
    rows = [{"i": i} for i in range(30)]
    ordered = curriculum(rows, lengths, (16384, 65536), seed=0)
    kinds = "".join("b" if lengths[r["i"]] <= 16384 else "e" if lengths[r["i"]] <= 65536 else "X" for r in ordered)
    assert kinds == "bbbbbbebbebbXbbbeXeXbXebeeeXeX"  # base only at first, all three mixed at the end
    assert sorted(r["i"] for r in ordered) == list(range(30))  # every row once per epoch
    assert mixture(lengths, (16384, 65536)) == {"base": 0.5, "extension": 0.3, "extreme": 0.2}
    assert not format_error(FAVOURED) and format_error("<think>no answer</think>")
    assert not format_error(TOOL_STEP)  # a valid step of a tool-using trajectory
    assert format_error('<answer>a</answer><tool_call>{"name": "search", "arguments": </tool_call>')
    assert format_error('<think>x</think><tool_call>{"name": "fly", "arguments": {}}</tool_call>')  # no such tool
    assert loss_plateau([2.0, 2.0, 1.0, 1.0], 2, 0.01) is False and loss_plateau([1.0, 1.0, 0.995, 0.995], 2, 0.01)
    assert loss_plateau([1.0, 1.0, 1.0], 2, 0.01) is False  # two whole windows needed


def test_early_stop_contexts_are_the_longest_prefixes_that_fit_each_length(tiny_model, tmp_path):
    """§5.1 measures format errors "at 64K and 128K context lengths on a validation set": from a trajectory, the
    policy writes the assistant turn after the longest prefix that fits the length (less the reply's tokens)."""
    from rubricforge.training.model import load_tokenizer
    from rubricforge.training.sft import chat_tokens, stop_contexts

    tok = load_tokenizer(str(tiny_model))
    messages = [{"role": "user", "content": "When was the Eiffel Tower completed?"},
                {"role": "assistant", "content": TOOL_STEP},
                {"role": "tool", "content": "<snippet id=s1>The tower was completed in 1889.</snippet> " * 20},
                {"role": "assistant", "content": FAVOURED}]
    path = tmp_path / "validation.jsonl"
    path.write_text(json.dumps({"messages": messages}) + "\n")
    long = chat_tokens(tok, messages[:3], None)
    got = stop_contexts(str(path), tok, [long + 63, long + 64], 64)
    assert got == {long + 63: [(messages[:1], None)], long + 64: [(messages[:3], None)]}
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q", "question": "When?"}) + "\n")
    first = stop_contexts(str(questions), tok, [65536, 131072], 64)
    assert first[65536] == first[131072] and first[65536][0][0][-1] == {"role": "user", "content": "When?"}


def test_the_early_stop_waits_for_mid_training_and_keeps_90_percent_of_its_entropy(tiny_model, tmp_path):
    """§5.1: "We additionally require that policy entropy at this point be no lower than 90% of its mid-training
    value (at 60K steps)": no stop before mid-training, none while the entropy is below 90 % of that value (the old
    callback stopped at the first check with well-formed answers and a flat loss)."""
    from types import SimpleNamespace

    from support.training_fakes import ScriptedPolicy
    from transformers import AutoModelForCausalLM, TrainerControl, TrainerState

    from rubricforge.training.model import load_tokenizer
    from rubricforge.training.sft import early_stop

    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": k, "question": q}) + "\n" for k, q in QUESTIONS.items()))
    cfg = Config.model_validate({"train": {"sft_stop_prompts": str(questions), "sft_stop_every": 10,
                                           "sft_stop_tokens": 64, "sft_stop_mid_step": 50}})
    tok = load_tokenizer(str(tiny_model))
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    ScriptedPolicy(model, tok, lambda context, row: TOOL_STEP)
    stop, state = early_stop(cfg, tok), TrainerState()

    def log(step: int, entropy: float, loss: float | None = 1.0) -> bool:
        state.global_step, control = step, TrainerControl()
        logs = {"entropy": entropy, **({"loss": loss} if loss is not None else {})}
        state.log_history.append({**logs, "step": step})
        stop.on_log(SimpleNamespace(logging_steps=10), state, control, model=model, logs=logs)
        return control.should_training_stop

    assert [log(30, 2.0), log(40, 2.0)] == [False, False]  # well-formed and flat, but before mid-training
    assert log(50, 1.0, loss=None) is False  # the mid-training entropy: 1.0
    assert log(60, 0.85) is False and stop.history[-1]["entropy_kept"] == 0.0
    assert log(70, 0.95) is True and stop.history[-1]["format_error"] == 0.0


@pytest.mark.parametrize("answer, stops_at", [(FAVOURED, 4), ("<think>rambling without an answer", 6)],
                         ids=["well-formed", "no-answer"])
def test_sft_stops_early_once_answers_are_well_formed_and_the_loss_is_flat(tiny_model, tmp_path, answer, stops_at):
    from support.training_fakes import ScriptedPolicy

    from rubricforge.training.sft import sft_trainer

    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": k, "question": q}) + "\n" for k, q in QUESTIONS.items()))
    cfg = Config.model_validate({"train": {
        "output_dir": str(tmp_path / "sft"), "sft_curriculum": True, "sft_stop_prompts": str(questions),
        "sft_stop_every": 2, "sft_stop_tokens": 64,
        "sft_args": {**CPU, "max_steps": 6, "learning_rate": 0.0, "warmup_steps": 0, "max_length": 512}}})
    rows = [{"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": FAVOURED}], "tools": None}
            for q in QUESTIONS.values()]
    trainer = sft_trainer(cfg, rows, str(tiny_model))
    ScriptedPolicy(trainer.model, trainer.processing_class, lambda context, row: answer)
    trainer.train()
    (stop,) = [c for c in trainer.callback_handler.callbacks if type(c).__name__ == "FormatEarlyStop"]
    # lr 0: the same batch every step, so the loss is flat from the first two windows on (step 4)
    assert trainer.state.global_step == stops_at, (stop.history, [h.get("loss") for h in trainer.state.log_history])
    assert [h["format_error"] for h in stop.history] == [0.0 if answer == FAVOURED else 1.0] * (stops_at // 2)
