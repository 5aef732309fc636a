"""`rubricforge train sft`: the cold-start SFT stage on chat-format trajectories (DeepRubric App. B Table 4).

Input: a JSONL of ``{"messages": [...], "tools"?: <JSON tool schemas or list>}`` lines — what ``rubricforge
rollouts sample`` writes, or annotated reference trajectories (system, user, assistant turns with
``tool_calls``, tool results). Only assistant tokens are trained (``assistant_only_loss``): tool results and
prompts are masked, as in GRPO. Defaults are Table 4's (2 epochs, lr 4e-5 cosine, warmup 0.1, batch 1 ×
16 accumulation, 16,384 tokens, BF16, weight decay 0); ``train.sft_args`` overrides any SFTConfig field.

MindDR §5.1 adds a curriculum (``train.sft_curriculum``: short trajectories before long ones) and an early stop
(``train.sft_stop_prompts``: every ``train.sft_stop_every`` steps the policy answers those questions; training
stops once their format error rate is at most 2.53 % and the loss has levelled off).
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import UserError, require_file
from rubricforge.extras import needs
from rubricforge.rewards.trajectory import parse_trajectory
from rubricforge.training.model import greedy_reply, load_tokenizer
from rubricforge.training.trl_seams import curriculum_sft_trainer

log = logging.getLogger(__name__)

TABLE_4: dict[str, Any] = dict(num_train_epochs=2, learning_rate=4e-5, lr_scheduler_type="cosine", warmup_steps=0.1,
                               per_device_train_batch_size=1, gradient_accumulation_steps=16, max_length=16384,
                               bf16=True, weight_decay=0.0, activation_checkpointing=True, assistant_only_loss=True,
                               logging_steps=1, save_strategy="epoch")


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, record) for every non-empty line of a JSONL file; a UserError names a line that is not JSON."""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError:
            raise UserError(f"{path}:{n} is not valid JSON", "fix or remove that line") from None


def sft_rows(path: str | Path) -> list[dict[str, Any]]:
    """The trajectories of a JSONL file; a UserError names the first line without usable ``messages``."""
    path = require_file(path, "trajectories file", "pass a JSONL written by `rubricforge rollouts sample`")
    rows = []
    for n, record in json_lines(path):
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


def curriculum(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MindDR §5.1's curriculum: shorter, simpler trajectories first, longer ones later (by their text length; the
    paper mixes in longer data gradually and gives no schedule, so each epoch runs from shortest to longest)."""
    return sorted(rows, key=lambda r: len(json.dumps(r["messages"], ensure_ascii=False)))


def format_error(completion: str) -> bool:
    """A format error (MindDR §5.1's early-stop metric): no non-empty final answer, or a tool call that does not
    parse."""
    traj = parse_trajectory(completion)
    return not (traj.answer and traj.answer.strip()) or any(not c.valid for c in traj.tool_calls)


def loss_plateau(losses: list[float], window: int, share: float) -> bool:
    """The mean loss of the last ``window`` logged steps within ``share`` of the window before it."""
    if len(losses) < 2 * window:
        return False
    last, before = statistics.fmean(losses[-window:]), statistics.fmean(losses[-2 * window:-window])
    return abs(before - last) <= share * abs(before)


def early_stop(cfg: Config, tokenizer: Any) -> Any:
    """A callback that, every ``train.sft_stop_every`` steps, lets the policy answer the questions of
    ``train.sft_stop_prompts`` (App. D prompt, greedy) and stops training once their format error rate is at most
    ``train.sft_stop_error`` (2.53 %: at least 2 of 8 GRPO rollouts valid with probability 0.95) and the loss has
    reached a plateau. The paper's third condition (entropy at least 90 % of its mid-training value) is not checked."""
    with needs("train"):
        from transformers import TrainerCallback

    from rubricforge.agent.tasks import training_rows

    t = cfg.train
    prompts = [r["prompt"] for r in training_rows(t.sft_stop_prompts or "", [])]

    class FormatEarlyStop(TrainerCallback):
        def __init__(self) -> None:
            self.history: list[dict[str, float]] = []  # one entry per check

        def on_log(self, args, state, control, model=None, logs=None, **kw):  # after the step's loss is logged
            if not logs or "loss" not in logs or state.global_step % t.sft_stop_every:
                return
            errors = sum(format_error(greedy_reply(model, messages, t.sft_stop_tokens, tokenizer=tokenizer))
                         for messages in prompts)
            losses = [h["loss"] for h in state.log_history if "loss" in h]
            rate = errors / len(prompts)
            plateau = loss_plateau(losses, max(1, t.sft_stop_every // args.logging_steps), t.sft_stop_plateau)
            self.history.append({"step": state.global_step, "format_error": rate, "plateau": float(plateau)})
            log.info("SFT step %d: format error %.1f%%, loss plateau %s", state.global_step, 100 * rate, plateau)
            if rate <= t.sft_stop_error and plateau:
                control.should_training_stop = True

    return FormatEarlyStop()


def sft_trainer(cfg: Config, rows: list[dict[str, Any]], model: str, stage: str = "sft") -> Any:
    """TRL's SFTTrainer over ``rows`` (``messages``, ``tools``), with the model's tokenizer checked for tool calls;
    with ``train.sft_curriculum`` in curriculum order, with ``train.sft_stop_prompts`` the early stop."""
    with needs("train"):
        from trl import SFTConfig

    from rubricforge.training.grpo import output_dir, trl_config

    args = trl_config(SFTConfig, sft_args(cfg, output_dir(cfg, stage)))
    tokenizer = load_tokenizer(model, cfg.train.chat_template)
    ordered = cfg.train.sft_curriculum
    trainer = curriculum_sft_trainer(ordered, model=model, args=args, processing_class=tokenizer,
                                     train_dataset=sft_dataset(curriculum(rows) if ordered else rows))
    if cfg.train.sft_stop_prompts:
        trainer.add_callback(early_stop(cfg, tokenizer))
    return trainer


def build_sft(cfg: Config, trajectories: str | Path, model: str) -> Any:
    """:func:`sft_trainer` over the trajectories of a JSONL file (checked first)."""
    return sft_trainer(cfg, sft_rows(trajectories), model)

