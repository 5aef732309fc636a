"""`rubricforge train sft`: the cold-start SFT stage on chat-format trajectories (DeepRubric App. B Table 4).

Input: a JSONL of ``{"messages": [...], "tools"?: <JSON tool schemas or list>}`` lines — what ``rubricforge
rollouts sample`` writes, or annotated reference trajectories (system, user, assistant turns with
``tool_calls``, tool results). Only assistant tokens are trained (``assistant_only_loss``): tool results and
prompts are masked, as in GRPO. Defaults are Table 4's (2 epochs, lr 4e-5 cosine, warmup 0.1, batch 1 ×
16 accumulation, 16,384 tokens, BF16, weight decay 0); ``train.sft_args`` overrides any SFTConfig field.

MindDR §5.1 adds a curriculum (``train.sft_curriculum``: short trajectories first, longer ones mixed in as training
goes on, :func:`curriculum`) and an early stop (``train.sft_stop_prompts``, :func:`early_stop`: every
``train.sft_stop_every`` steps the policy writes its next turn on a validation set at 64K and 128K context; training
stops once the format error rate is at most 2.53 % at both, the loss has levelled off and the entropy is at least
90 % of its mid-training value).
"""

from __future__ import annotations

import json
import logging
import random
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


def curriculum(rows: list[dict[str, Any]], lengths: list[int], bins: tuple[int, int] = (16384, 65536),
               seed: int = 0) -> list[dict[str, Any]]:
    """MindDR §5.1's curriculum: "earlier training is dominated by shorter, simpler samples … longer and harder
    samples are gradually introduced" until the mixture holds all of them (the paper's: 32K–64K ≈ 30 %, 128K ≈
    15 %). Rows fall into three bins by their token ``lengths`` (base up to ``bins[0]``, extension up to
    ``bins[1]``, extreme beyond); each row gets a seeded place in the epoch, base rows anywhere, extension rows in
    its last two thirds, extreme rows in its last third, so the first third is base rows only and the last third
    mixes all three. The mixture is the data's own (every row once per epoch); :func:`mixture` reports its shares."""
    rng = random.Random(seed)
    start = [0.0 if n <= bins[0] else 1 / 3 if n <= bins[1] else 2 / 3 for n in lengths]
    places = [s + (1 - s) * rng.random() for s in start]
    return [rows[i] for i in sorted(range(len(rows)), key=places.__getitem__)]


def mixture(lengths: list[int], bins: tuple[int, int]) -> dict[str, float]:
    """The shares of the curriculum's bins (base, extension, extreme) in the data."""
    n = len(lengths) or 1
    return {"base": sum(x <= bins[0] for x in lengths) / n,
            "extension": sum(bins[0] < x <= bins[1] for x in lengths) / n, "extreme": sum(x > bins[1] for x in lengths) / n}


def format_error(completion: str) -> bool:
    """A format error (MindDR §5.1's early-stop metric) in one assistant turn: a tool call that does not parse, or
    neither a non-empty final answer nor a tool call (a turn that calls a tool correctly is a valid ReAct step)."""
    traj = parse_trajectory(completion)
    if any(not c.valid for c in traj.tool_calls):
        return True
    return not (traj.tool_calls or (traj.answer and traj.answer.strip()))


def chat_tokens(tokenizer: Any, messages: list[dict[str, Any]], tools: list[Any] | None) -> int:
    return len(tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                             return_dict=False))


def stop_contexts(path: str, tokenizer: Any, contexts: list[int], reply_tokens: int) -> dict[int, list[tuple[Any, Any]]]:
    """The early stop's validation contexts per context length: a dataset's questions give the App. D prompt (the
    policy's first step, the same at every length); a trajectories JSONL (``messages``) gives, per length L, the
    longest prefix that ends before an assistant turn and fits in L − ``reply_tokens`` tokens (else the shortest)."""
    from rubricforge.agent.rows import training_rows

    file = Path(path)
    first = next(json_lines(file), (0, None))[1] if file.is_file() else None
    if not (isinstance(first, dict) and "messages" in first):
        prompts = [(r["prompt"], None) for r in training_rows(path, [])]
        return dict.fromkeys(contexts, prompts)
    out: dict[int, list[tuple[Any, Any]]] = {n: [] for n in contexts}
    for row in sft_rows(file):
        messages, tools = row["messages"], row["tools"]
        cuts = [(i, chat_tokens(tokenizer, messages[:i], tools)) for i, m in enumerate(messages)
                if m.get("role") == "assistant" and i > 0]
        if not cuts:  # no turn to write after a context
            continue
        for n in contexts:
            fit = [i for i, size in cuts if size <= n - reply_tokens]
            out[n].append((messages[:max(fit) if fit else cuts[0][0]], tools))
    return out


def loss_plateau(losses: list[float], window: int, share: float) -> bool:
    """The mean loss of the last ``window`` logged steps within ``share`` of the window before it."""
    if len(losses) < 2 * window:
        return False
    last, before = statistics.fmean(losses[-window:]), statistics.fmean(losses[-2 * window:-window])
    return abs(before - last) <= share * abs(before)


def early_stop(cfg: Config, tokenizer: Any) -> Any:
    """MindDR §5.1's early stop as a callback: every ``train.sft_stop_every`` steps the policy writes the next turn
    (greedy, at most ``train.sft_stop_tokens`` tokens) for each validation context at each context length
    (:func:`stop_contexts`, ``train.sft_stop_contexts``: 64K and 128K); training stops once the format error rate
    (:func:`format_error`) at every length is at most ``train.sft_stop_error`` (2.53 %: at least 2 of 8 GRPO rollouts
    valid with probability 0.95), the loss has reached a plateau, and the policy's token entropy (TRL's logged
    ``entropy``) is at least ``train.sft_stop_entropy`` (90 %) of its value at mid-training
    (``train.sft_stop_mid_step``, default half of the run's steps; no stop before it)."""
    with needs("train"):
        from transformers import TrainerCallback

    t = cfg.train
    contexts = stop_contexts(t.sft_stop_prompts or "", tokenizer, t.sft_stop_contexts, t.sft_stop_tokens)

    class FormatEarlyStop(TrainerCallback):
        def __init__(self) -> None:
            self.history: list[dict[str, Any]] = []  # one entry per check
            self.mid_entropy: float | None = None

        def on_log(self, args, state, control, model=None, logs=None, **kw):  # after the step's loss is logged
            mid = t.sft_stop_mid_step or max(1, state.max_steps // 2)
            if logs and "entropy" in logs and self.mid_entropy is None and state.global_step >= mid:
                self.mid_entropy = float(logs["entropy"])
            if not logs or "loss" not in logs or state.global_step % t.sft_stop_every:
                return
            replies: dict[str, bool] = {}  # one generation per distinct context (questions: the same at every length)

            def error(messages: list[dict[str, Any]], tools: Any) -> bool:
                key = json.dumps([messages, tools], sort_keys=True, default=str)
                if key not in replies:
                    replies[key] = format_error(greedy_reply(model, messages, t.sft_stop_tokens, tokenizer=tokenizer,
                                                             tools=tools))
                return replies[key]

            rates = {n: statistics.fmean(error(m, tools) for m, tools in items) for n, items in contexts.items()}
            losses = [h["loss"] for h in state.log_history if "loss" in h]
            plateau = loss_plateau(losses, max(1, t.sft_stop_every // args.logging_steps), t.sft_stop_plateau)
            entropy = logs.get("entropy")
            kept = (self.mid_entropy is not None and entropy is not None
                    and entropy >= t.sft_stop_entropy * self.mid_entropy)
            self.history.append({"step": state.global_step, "format_error": max(rates.values()),
                                 "format_error_by_context": rates, "plateau": float(plateau),
                                 "entropy": entropy, "entropy_kept": float(kept)})
            log.info("SFT step %d: format error %s, loss plateau %s, entropy %s (mid-training %s)", state.global_step,
                     ", ".join(f"{100 * r:.1f}% at {n}" for n, r in rates.items()), plateau, entropy, self.mid_entropy)
            if max(rates.values()) <= t.sft_stop_error and plateau and kept:
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
    if ordered:
        lengths = [chat_tokens(tokenizer, r["messages"], r["tools"]) for r in rows]
        bins = cfg.train.sft_curriculum_bins
        log.info("SFT curriculum mixture: %s (MindDR §5.1: extension ≈ 30 %%, extreme ≈ 15 %%)",
                 ", ".join(f"{k} {100 * v:.0f}%" for k, v in mixture(lengths, bins).items()))
        rows = curriculum(rows, lengths, bins, args.seed)
    trainer = curriculum_sft_trainer(ordered, model=model, args=args, processing_class=tokenizer,
                                     train_dataset=sft_dataset(rows))
    if cfg.train.sft_stop_prompts:
        trainer.add_callback(early_stop(cfg, tokenizer))
    return trainer


def build_sft(cfg: Config, trajectories: str | Path, model: str) -> Any:
    """:func:`sft_trainer` over the trajectories of a JSONL file (checked first)."""
    return sft_trainer(cfg, sft_rows(trajectories), model)

