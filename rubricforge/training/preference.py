"""MindDR §5.4's alignment stage on the pairs `train dpo-pairs` writes: DPO (Eq. 14) and Self-SFT (Eq. 15).

* ``train dpo`` — TRL's DPOTrainer with the sigmoid loss, which is Eq. 14:
  −log σ(β log π_θ(y+|x)/π_ref(y+|x) − β log π_θ(y−|x)/π_ref(y−|x)), the reference being the policy before
  training; β = ``train.dpo_beta`` (the paper gives none; 0.1 is TRL's default). ``train.dpo_args`` sets any
  ``DPOConfig`` field.
* ``train self-sft`` — Eq. 15, −log π_θ(y+|x) on D+: SFT (assistant tokens only) on prompt + chosen of every pair,
  with ``train sft``'s settings (``train.sft_args``). D+ is what the pairs hold: a question's high-quality
  rollouts without a low-quality partner are not in them (the reading the code takes).

Both read ``pairs.jsonl`` (or the ``dpo-pairs`` output folder holding it); a line without a ``prompt``,
``chosen`` and ``rejected`` message list is named with its line number. In DPO the chosen and rejected turns are
scored whole: tool results inside them count like the model's own tokens (TRL's DPO has no tool mask).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.extras import needs
from rubricforge.training.model import load_tokenizer
from rubricforge.training.sft import json_lines

PAIRS_FILE = "pairs.jsonl"


def pair_rows(path: str | Path) -> list[dict[str, Any]]:
    """The pairs of ``path`` (``pairs.jsonl`` or a folder holding it) as ``{prompt, chosen, rejected}`` rows."""
    path = Path(path)
    if path.is_dir():
        path = path / PAIRS_FILE
    if not path.is_file():
        raise UserError(f"pairs file {path} not found", "pass the --out folder of `rubricforge train dpo-pairs`")
    rows = []
    for n, record in json_lines(path):
        if not isinstance(record, dict) or not all(isinstance(record.get(k), list) and record[k]
                                                   for k in ("prompt", "chosen", "rejected")):
            raise UserError(f"{path}:{n} lacks a 'prompt', 'chosen' or 'rejected' message list",
                            "write the pairs with `rubricforge train dpo-pairs`")
        rows.append({k: record[k] for k in ("prompt", "chosen", "rejected")})
    if not rows:
        raise UserError(f"{path} holds no pairs", "score more rollouts, or lower train.dpo_high / raise train.dpo_low")
    return rows


def build_dpo(cfg: Config, pairs: str | Path, model: str) -> Any:
    """TRL's DPOTrainer (Eq. 14) over the pairs, checked first."""
    with needs("train"):
        from datasets import Dataset, Features, Json, List
        from trl import DPOConfig, DPOTrainer

    from rubricforge.training.grpo import output_dir, trl_config
    from rubricforge.training.presets import require_gpu

    rows = pair_rows(pairs)
    args = {"beta": cfg.train.dpo_beta, "loss_type": ["sigmoid"], "logging_steps": 1,
            "output_dir": str(output_dir(cfg, "dpo")), **cfg.train.dpo_args}
    require_gpu(args, "DPO in BF16", "set train.dpo_args.bf16=false and train.dpo_args.use_cpu=true")
    features = Features({k: List(Json()) for k in ("prompt", "chosen", "rejected")})
    return DPOTrainer(model=model, args=trl_config(DPOConfig, args), processing_class=load_tokenizer(model, cfg.train.chat_template),
                      train_dataset=Dataset.from_list(rows, features=features))


def build_self_sft(cfg: Config, pairs: str | Path, model: str) -> Any:
    """SFT (Eq. 15) on prompt + chosen of every pair."""
    from rubricforge.training.sft import sft_trainer

    rows = [{"messages": [*r["prompt"], *r["chosen"]], "tools": None} for r in pair_rows(pairs)]
    return sft_trainer(cfg, rows, model, "self-sft")

