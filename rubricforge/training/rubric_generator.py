"""`rubricforge train rubric-generator`: GRPO of a query-specific rubric generator (Prefs §3.3, App. D; docs/methods.md Q-6).

Each training row is one preference pair of the ``train`` split: the prompt is C.1 with the pair's query
(:func:`~rubricforge.rubric_gen.pref_rubrics.generation_messages`), and the reward is the hybrid reward of
Eq. 1 (:mod:`rubricforge.rewards.prefs.hybrid_reward`) over the row's ``report_chosen`` / ``report_rejected``,
with λ_pref / λ_llm from ``reward.lambda_pref`` / ``reward.lambda_llm``. No tools. Under the ``paper``
preset the GRPO settings are App. D Table 3's (lr 1e-6 constant, weight decay 0.1, G = 8, 256 rollouts per
step, KL 0, clip 0.2, responses up to 8,192 tokens, temperature 1.0); ``small-gpu`` and ``cpu`` are the
shared presets. Every step logs the mean R_pref, R_llm and R_fmt and the unscored count.
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.extras import needs
from rubricforge.pipelines.preferences import load_pairs
from rubricforge.rewards.prefs.hybrid_reward import hybrid_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rubric_gen.pref_rubrics import generation_messages
from rubricforge.training.grpo import GRPORun, output_dir, trl_config
from rubricforge.training.model import load_tokenizer
from rubricforge.training.presets import generation_args, preset_args, require_gpu

TABLE3 = dict(num_generations=8, generation_batch_size=256, learning_rate=1e-6, lr_scheduler_type="constant",
              weight_decay=0.1, beta=0.0, epsilon=0.2, temperature=1.0, top_p=1.0, max_completion_length=8192)


def generator_args(cfg: Config) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments: preset (Table 3 for ``paper``) < generation backend < ``train.grpo_args``."""
    t = cfg.train
    args = {**preset_args(t.preset, t.loss), **(TABLE3 if t.preset == "paper" else {}),
            **generation_args(t.generation, t.vllm_server_url), "logging_steps": 1,
            "output_dir": str(output_dir(cfg, "rubric-generator")), **t.grpo_args}
    if args.get("bf16") and "model_init_kwargs" not in args:
        args["model_init_kwargs"] = {"dtype": "bfloat16"}
    require_gpu(args, f"preset '{t.preset}'", "run on a GPU machine, or use --preset cpu for a CPU smoke run")
    return args


def generator_rows(pairs: str | Path) -> list[dict[str, Any]]:
    """One row per training pair: the C.1 prompt and the columns the reward reads."""
    return [{"id": p.id, "prompt": generation_messages(p.query), "query": p.query,
             "report_chosen": p.report_chosen, "report_rejected": p.report_rejected}
            for p in load_pairs(pairs, split="train")]


def _text(completion: Any) -> str:
    return completion if isinstance(completion, str) else "".join(str(m.get("content", "")) for m in completion)


def hybrid_reward_function(judge: Judge, lambda_pref: float, lambda_llm: float) -> Any:
    """The TRL reward function of Eq. 1 (one float, or None when the judge failed, per completion)."""

    async def rubric_generator_hybrid(prompts: list[Any], completions: list[Any], query: list[str],
                                      report_chosen: list[str], report_rejected: list[str], **kwargs: Any
                                      ) -> list[float | None]:
        got = await asyncio.gather(*(hybrid_reward(judge, q, _text(c), a, r, lambda_pref, lambda_llm)
                                     for c, q, a, r in zip(completions, query, report_chosen, report_rejected, strict=True)))
        if callable(log := kwargs.get("log_metric")):
            for name in ("pref", "llm", "fmt"):
                values = [getattr(g, name) for g in got if getattr(g, name) is not None]
                if values:
                    log(f"rubric_generator/{name}/mean", statistics.fmean(values))
            log("rubric_generator/unscored", float(sum(g.total is None for g in got)))
        return [g.total for g in got]

    return rubric_generator_hybrid


def build_rubric_generator(cfg: Config, pairs: str | Path, model: str) -> GRPORun:
    """Check the pairs and the preset, then build the trainer (no tools)."""
    with needs("train"):
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

    from rubricforge.llm import LLMClient

    rows = generator_rows(pairs)
    args = trl_config(GRPOConfig, generator_args(cfg))
    tokenizer = load_tokenizer(model, cfg.train.chat_template, tools=False)
    client = LLMClient(cfg.llm)
    reward = hybrid_reward_function(Judge(client), cfg.reward.lambda_pref, cfg.reward.lambda_llm)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer)
    return GRPORun(trainer, None, client, Path(args.output_dir))
