"""Hyperparameter presets and loss types, as keyword arguments of TRL's ``GRPOConfig``.

* ``paper`` — DeepRubric App. B Table 5: group size 8, 8 prompts per step (batch 64), mini-batch 4 prompts
  (``per_device_train_batch_size=4`` × 8 GPUs = 32 rollouts per optimiser step, 2 per generation), lr 1e-6
  constant, KL 0, entropy 0, temperature 1.0, top-p 1.0, responses up to 28,288 tokens, BF16, weight decay
  0, 140 steps, a checkpoint every 5 steps, vLLM at 0.6 of GPU memory. Needs GPUs (the paper: 8×A100;
  on fewer, raise ``gradient_accumulation_steps`` to keep 32 rollouts per optimiser step).
* ``small-gpu`` — the same recipe shrunk for one 24–80 GB GPU: group size 4, 2 prompts per step, responses
  up to 4,096 tokens, gradient checkpointing, vLLM (colocated) at 0.3 of GPU memory.
* ``cpu`` — a smoke run on CPU: group size 2, one prompt, 256-token responses, 1 step, FP32.

Loss types (``train.loss``): ``grpo`` (the paper's: token-level ratios, per-sequence mean), ``dapo``
(token-level mean over the batch, clip-higher ε_high = 0.28), ``gspo`` (sequence-level importance sampling,
``importance_sampling_level="sequence"``, ε = 3e-4 / 4e-4 as in the GSPO paper and TRL's paper index).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from rubricforge.errors import UserError
from rubricforge.extras import needs

PRESETS: dict[str, dict[str, Any]] = {
    "paper": dict(num_generations=8, generation_batch_size=64, per_device_train_batch_size=4,
                  gradient_accumulation_steps=1, learning_rate=1e-6, lr_scheduler_type="constant", beta=0.0,
                  entropy_coef=0.0, temperature=1.0, top_p=1.0, max_completion_length=28288, weight_decay=0.0,
                  bf16=True, activation_checkpointing=True, max_steps=140, save_steps=5,
                  vllm_gpu_memory_utilization=0.6),
    "small-gpu": dict(num_generations=4, generation_batch_size=8, per_device_train_batch_size=2,
                      gradient_accumulation_steps=1, learning_rate=1e-6, lr_scheduler_type="constant", beta=0.0,
                      temperature=1.0, top_p=1.0, max_completion_length=4096, weight_decay=0.0, bf16=True,
                      activation_checkpointing=True, max_steps=140, save_steps=20, vllm_gpu_memory_utilization=0.3),
    "cpu": dict(num_generations=2, generation_batch_size=2, per_device_train_batch_size=2,
                gradient_accumulation_steps=1, learning_rate=1e-6, beta=0.0, temperature=1.0,
                max_completion_length=256, bf16=False, use_cpu=True, activation_checkpointing=False, max_steps=1,
                save_strategy="no", report_to="none"),
}
# The self-play papers' own settings, applied by `train hote` / `train score` over the preset (train.grpo_args still
# wins): (the algorithm's, whatever the preset; the paper's sizes, with preset `paper` only, since the smaller
# presets exist to shrink them). HOTE §3.2 (DR Tulu's values): lr 5e-7, at most 10 tool uses, temperature 1,
# responses of 16,384 tokens, Eq. 1's token-level loss (DAPO's aggregation, without its clip-higher). SCORE App. G
# Table 2: lr 1e-6, at most 10 assistant turns; 64 queries x 8 rollouts, PPO mini-batch 32 queries (two optimiser
# steps per batch on one GPU: 8 rollouts x 32 accumulated), responses of 4,096 tokens, 5 warm-up SCORE steps
# (score.warmup, turned into optimiser steps by training.score.score_args).
METHODS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "hote": (dict(learning_rate=5e-7, max_tool_calling_iterations=10, temperature=1.0, loss_type="dapo",
                  importance_sampling_level="token"),
             dict(max_completion_length=16384)),
    "score": (dict(learning_rate=1e-6, max_tool_calling_iterations=10),
              dict(num_generations=8, generation_batch_size=512, per_device_train_batch_size=8,
                   gradient_accumulation_steps=32, max_completion_length=4096,
                   lr_scheduler_type="constant_with_warmup")),
}
LOSSES: dict[str, dict[str, Any]] = {
    "grpo": dict(loss_type="grpo", importance_sampling_level="token"),
    "dapo": dict(loss_type="dapo", importance_sampling_level="token", epsilon_high=0.28),
    "gspo": dict(loss_type="grpo", importance_sampling_level="sequence", epsilon=3e-4, epsilon_high=4e-4),
}


def preset_args(preset: str, loss: str | None = None) -> dict[str, Any]:
    """The ``GRPOConfig`` keyword arguments of ``preset`` with ``loss`` (default: ``grpo``, the paper's)."""
    if preset not in PRESETS:
        raise UserError(f"unknown training preset '{preset}'", f"use one of: {', '.join(PRESETS)}")
    loss = loss or "grpo"
    if loss not in LOSSES:
        raise UserError(f"unknown loss type '{loss}'", f"use one of: {', '.join(LOSSES)}")
    return {**PRESETS[preset], **LOSSES[loss]}


def method_args(method: str, preset: str, explicit: Collection[str] = ()) -> dict[str, Any]:
    """``METHODS[method]``'s ``GRPOConfig`` arguments for ``preset``, less those the config sets itself
    (``explicit``: ``loss`` -> the loss type, ``max_tool_turns`` -> the tool-call cap)."""
    algorithm, sizes = METHODS[method]
    out = {**algorithm, **(sizes if preset == "paper" else {})}
    if "loss" in explicit:
        out = {k: v for k, v in out.items() if k not in ("loss_type", "importance_sampling_level")}
    if "max_tool_turns" in explicit:
        out.pop("max_tool_calling_iterations", None)
    return out


def optimiser_steps_per_generation(args: Any) -> int:
    """Optimiser steps TRL makes per generation batch (a ``GRPOConfig``): ``steps_per_generation × num_iterations``
    micro-batches, ``gradient_accumulation_steps`` of them to a step (SCORE ``--preset paper``: 64 / 32 = 2)."""
    return max(1, args.steps_per_generation * args.num_iterations // args.gradient_accumulation_steps)


def require_gpu(args: dict[str, Any], what: str, fix: str) -> None:
    """A UserError when ``args`` need a CUDA GPU (BF16 or vLLM, unless ``use_cpu``) and none is visible."""
    with needs("train"):
        import torch

    if args.get("use_cpu") or not (args.get("bf16") or args.get("use_vllm")) or torch.cuda.is_available():
        return
    raise UserError(f"{what} needs a CUDA GPU and none is visible", fix)


def generation_args(mode: str, server_url: str | None = None) -> dict[str, Any]:
    """How rollouts are generated: vLLM colocated / as a server when it is installed, else transformers."""
    import importlib.util

    has_vllm = importlib.util.find_spec("vllm") is not None
    if mode == "auto":
        with needs("train"):
            import torch

        if not (has_vllm and torch.cuda.is_available()):
            return {"use_vllm": False}
        mode = "vllm-server" if server_url else "vllm-colocate"
    if mode == "transformers":
        return {"use_vllm": False}
    if not has_vllm:
        raise UserError(f"train.generation={mode} needs vLLM, which is not installed",
                        "install vLLM on the GPU machine (pip install 'trl[vllm]'), or set train.generation=transformers")
    if mode == "vllm-colocate":
        return {"use_vllm": True, "vllm_mode": "colocate"}
    return {"use_vllm": True, "vllm_mode": "server", **({"vllm_server_base_url": server_url} if server_url else {})}
