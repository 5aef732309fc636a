"""`rubricforge train sft`: the cold-start SFT stage on chat-format trajectories (DeepRubric App. B Table 4).

Input: a JSONL of ``{"messages": [...], "tools"?: <JSON tool schemas or list>}`` lines — what ``rubricforge
rollouts sample`` writes, or annotated reference trajectories (system, user, assistant turns with
``tool_calls``, tool results). Only assistant tokens are trained (``assistant_only_loss``): tool results and
prompts are masked, as in GRPO. Defaults are Table 4's (2 epochs, lr 4e-5 cosine, warmup 0.1, batch 1 ×
16 accumulation, 16,384 tokens, BF16, weight decay 0); ``train.sft_args`` overrides any SFTConfig field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import UserError, require_file
from rubricforge.extras import needs
from rubricforge.training.model import load_tokenizer

TABLE_4: dict[str, Any] = dict(num_train_epochs=2, learning_rate=4e-5, lr_scheduler_type="cosine", warmup_steps=0.1,
                               per_device_train_batch_size=1, gradient_accumulation_steps=16, max_length=16384,
                               bf16=True, weight_decay=0.0, activation_checkpointing=True, assistant_only_loss=True,
                               logging_steps=1, save_strategy="epoch")


def sft_rows(path: str | Path) -> list[dict[str, Any]]:
    """The trajectories of a JSONL file; a UserError names the first line without usable ``messages``."""
    path = require_file(path, "trajectories file", "pass a JSONL written by `rubricforge rollouts sample`")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise UserError(f"{path}:{n} is not valid JSON", "fix or remove that line") from None
        messages = record.get("messages") if isinstance(record, dict) else None
        if not isinstance(messages, list) or not any(isinstance(m, dict) and m.get("role") == "assistant"
                                                     for m in messages):
            raise UserError(f"{path}:{n} has no 'messages' list with an assistant turn",
                            'write one {"messages": [...chat messages...]} trajectory per line')
        tools = record.get("tools")
        rows.append({"messages": messages, "tools": json.loads(tools) if isinstance(tools, str) else tools})
    if not rows:
        raise UserError(f"{path} holds no trajectories", "sample some with `rubricforge rollouts sample`")
    return rows


def sft_dataset(rows: list[dict[str, Any]]) -> Any:
    """Messages and tool schemas as JSON features: tool-call arguments differ per tool (``query`` / ``url``),
    which Arrow structs would merge into one struct with nulls that the chat template then renders."""
    with needs("train"):
        from datasets import Dataset, Features, Json, List

    return Dataset.from_list(rows, features=Features({"messages": List(Json()), "tools": Json()}))


def sft_args(cfg: Config, output_dir: Path) -> dict[str, Any]:
    from rubricforge.training.presets import require_gpu

    args = {**TABLE_4, "output_dir": str(output_dir), **cfg.train.sft_args}
    require_gpu(args, "SFT with the App. B Table 4 settings (BF16)", "run on a GPU machine, or set "
                "train.sft_args.bf16=false and train.sft_args.use_cpu=true")
    return args


def build_sft(cfg: Config, trajectories: str | Path, model: str) -> Any:
    """TRL's SFTTrainer over the trajectories (checked first), with the model's tokenizer checked for tool calls."""
    with needs("train"):
        from trl import SFTConfig, SFTTrainer

    from rubricforge.training.grpo import output_dir, trl_config

    rows = sft_rows(trajectories)
    args = trl_config(SFTConfig, sft_args(cfg, output_dir(cfg, "sft")))
    tokenizer = load_tokenizer(model, cfg.train.chat_template)
    return SFTTrainer(model=model, args=args, train_dataset=sft_dataset(rows), processing_class=tokenizer)


def run_sft(cfg: Config, trajectories: str | Path, model: str) -> tuple[Path, dict[str, float]]:
    """Train, save the model to the output folder; returns it and the last logged metrics."""
    trainer = build_sft(cfg, trajectories, model)
    trainer.train()
    trainer.save_model(trainer.args.output_dir)
    history = [h for h in trainer.state.log_history if "loss" in h]
    return Path(trainer.args.output_dir), history[-1] if history else {}
