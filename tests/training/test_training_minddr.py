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

def test_curriculum_format_errors_and_plateau():
    from rubricforge.training.sft import curriculum, format_error, loss_plateau

    rows = [{"messages": [{"role": "assistant", "content": "x" * n}]} for n in (30, 5, 12)]
    assert [len(r["messages"][0]["content"]) for r in curriculum(rows)] == [5, 12, 30]
    assert not format_error(FAVOURED) and format_error("<think>no answer</think>")
    assert format_error('<answer>a</answer><tool_call>{"name": "search", "arguments": </tool_call>')
    assert loss_plateau([2.0, 2.0, 1.0, 1.0], 2, 0.01) is False and loss_plateau([1.0, 1.0, 0.995, 0.995], 2, 0.01)
    assert loss_plateau([1.0, 1.0, 1.0], 2, 0.01) is False  # two whole windows needed


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
