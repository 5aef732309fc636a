"""MindDR §5.4 on CPU with the tiny Qwen2 policy: `train dpo` (Eq. 14) and `train self-sft` (Eq. 15) on the pairs
`train dpo-pairs` writes move the policy toward the chosen report, against a learning-rate-0 control."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_training_learns import DISFAVOURED, FAVOURED, QUESTIONS, log_prob

from rubricforge.config import Config
from rubricforge.errors import UserError

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

    from rubricforge.training.preference import run_preference

    args = {**CPU, "learning_rate": lr, **({"warmup_steps": 0, "max_length": 512} if method == "self-sft" else {})}
    cfg = Config.model_validate({"train": {"output_dir": str(tmp_path / f"{method}-{lr}"),
                                           "dpo_args" if method == "dpo" else "sft_args": args}})
    tok = AutoTokenizer.from_pretrained(model)
    prompts = [[{"role": "user", "content": q}] for q in QUESTIONS.values()]

    def logps(folder: Path) -> tuple[float, float]:
        m = AutoModelForCausalLM.from_pretrained(folder)
        return (sum(log_prob(m, tok, p, FAVOURED) for p in prompts), sum(log_prob(m, tok, p, DISFAVOURED) for p in prompts))

    before = logps(model)
    out, metrics = run_preference(cfg, pairs(tmp_path), str(model), method)
    assert metrics["loss"] == metrics["loss"]  # logged, not NaN
    after = logps(out)
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
