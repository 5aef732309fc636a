"""`rubricforge train grpo`: TRL's GRPOTrainer with tool-using rollouts and rubricforge's reward.

The policy answers each question with the App. D system prompt, calling ``search`` / ``browse`` /
``scholar`` through TRL's ``environment_factory`` (one :class:`~rubricforge.agent.environment.ResearchEnvironment`
per rollout, tool turns capped by ``train.max_tool_turns`` via ``max_tool_calling_iterations``; TRL masks
the tool-result tokens out of the loss with its ``tool_mask``). Rewards are async and run concurrently on
TRL's event loop; the scorer's memo and the LLM cache keep each judge call to one.

Paper-specific defaults follow the reward: MindDR's Search-RL (``search_rl``) uses Eq. 2's mean-only advantage
(``scale_rewards="none"``); its Report-RL rewards (``report``, ``race``, ``report_citation``, ``report_format``)
train without tools on the rows' own prompts (``build --source report`` writes the query, and for the long form
the retrieval data and outline, into them, §5.3 / Fig. 6). ``evolve.modes=no_tool`` loads no index either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from rubricforge.agent.environment import NoToolEnvironment, environment_factory
from rubricforge.agent.rows import training_rows
from rubricforge.config import Config
from rubricforge.corpora.tools import ToolBox
from rubricforge.errors import UserError
from rubricforge.evaluation.gold import gold_callback, held_out
from rubricforge.extras import needs
from rubricforge.rewards.scorer import NO_TOOL, REPORT, RewardScorer
from rubricforge.training.adaptive import TOOL, StepHooks, check_settings
from rubricforge.training.cost import grpo_cost
from rubricforge.training.model import greedy_reply, load_tokenizer
from rubricforge.training.presets import LOSSES, generation_args, method_args, preset_args, require_gpu
from rubricforge.training.rewards import grpo_reward
from rubricforge.training.trl_seams import STATE_FILE, adaptive_trainer


def output_dir(cfg: Config, stage: str) -> Path:
    return Path(cfg.train.output_dir) if cfg.train.output_dir else Path(cfg.run_dir) / "train" / stage


def grpo_args(cfg: Config, stage: str = "grpo", **method: Any) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments: preset < loss type < generation backend < ``method`` (a training method's
    own constants, e.g. SCORE's KL) < ``train.grpo_args``."""
    t = cfg.train
    args = {**preset_args(t.preset, t.loss), **generation_args(t.generation, t.vllm_server_url),
            "max_tool_calling_iterations": t.max_tool_turns, "logging_steps": 1,
            "output_dir": str(output_dir(cfg, stage)), **method, **t.grpo_args}
    if args.get("bf16") and "model_init_kwargs" not in args:
        args["model_init_kwargs"] = {"dtype": "bfloat16"}
    require_gpu(args, f"preset '{t.preset}'", "run on a GPU machine, or use --preset cpu for a CPU smoke run")
    return args


def paper_args(cfg: Config, method: str) -> dict[str, Any]:
    """A self-play method's own settings (:data:`~rubricforge.training.presets.METHODS`) for ``cfg``'s preset, less
    what the config sets itself (``train.loss``, an explicit ``train.max_tool_turns``)."""
    t = cfg.train
    explicit = {*(["loss"] if t.loss else []), *(["max_tool_turns"] if "max_tool_turns" in t.model_fields_set else [])}
    return method_args(method, t.preset, explicit)


def response_tokens(cfg: Config, method: str | None = None) -> int:
    """The longest response the run's settings allow (``max_completion_length`` of preset < method < overrides),
    without building a ``GRPOConfig`` (which a GPU preset cannot on CPU)."""
    t = cfg.train
    args = {**preset_args(t.preset, t.loss), **(paper_args(cfg, method) if method else {}), **t.grpo_args}
    return int(args.get("max_completion_length", 256))


def reward_args(reward: str, loss: str | None = None) -> dict[str, Any]:
    """``GRPOConfig`` arguments that a reward's paper fixes: MindDR Eq. 2's mean-only advantage for Search-RL
    (r − mean of the group, not divided by its std); DAPO's loss for Report-RL (§5.3: "For Report-RL on dense
    models, we therefore adopt DAPO": token-level loss, clip-higher, no KL) unless ``train.loss`` names one."""
    if reward == "search_rl":
        return {"scale_rewards": "none"}
    return LOSSES["dapo"] if reward in REPORT and loss is None else {}


def report_rl_prompt(row: dict[str, Any], tag: str) -> dict[str, Any]:
    """A Report-RL row whose last user turn also asks for the answer tag (Eq. 11) and, when the row carries
    retrieval data, the ``<cite id=…>`` markup (Eq. 10) that the rewards score (prompt files ``report_format*``)."""
    from rubricforge.pipelines.prompting import render

    ask = render("report_format_cite" if row.get("retrieval_data") else "report_format", tag=tag)
    prompt = [dict(m) for m in row["prompt"]]
    last = max(i for i, m in enumerate(prompt) if m.get("role") == "user")
    prompt[last]["content"] = f"{prompt[last]['content']}\n\n{ask}"
    return {**row, "prompt": prompt}


def trl_config(cls: type, args: dict[str, Any]) -> Any:
    """``cls(**args)`` (a TRL config class) with its complaints turned into one-line UserErrors. Transformers
    before 5.2x names ``activation_checkpointing`` ``gradient_checkpointing``; the older name is used there."""
    import dataclasses

    fields = {f.name for f in dataclasses.fields(cls)}
    if "activation_checkpointing" in args and "activation_checkpointing" not in fields:
        args = {k if k != "activation_checkpointing" else "gradient_checkpointing": v for k, v in args.items()}
    try:
        return cls(**args)
    except (TypeError, ValueError) as exc:
        raise UserError(f"invalid {cls.__name__} settings: {str(exc).splitlines()[0]}",
                        "fix train.grpo_args / train.sft_args (see TRL's documentation of the field)") from None


class StepState(Protocol):
    """Per-step training state that a checkpoint carries (adaptive hooks, SCORE's loop)."""

    def load(self, path: str | Path) -> None: ...


@dataclass
class GRPORun:
    """A built trainer and what it holds open; :meth:`train` runs it, saves the policy and closes the rest."""

    trainer: Any
    toolbox: ToolBox | None  # None for a trainer without tools (the rubric generator)
    client: Any
    output_dir: Path
    hooks: StepState | None = None  # None: no per-step state (plain GRPO, the rubric generator)
    note: str = ""  # what the run costs beyond the policy (judge calls per step of an evolving bank)

    def train(self, resume_from: str | Path | None = None) -> dict[str, float]:
        """Train (from checkpoint ``resume_from`` with its bank, λ and sampling weights, when given), save the
        policy to :attr:`output_dir`; returns the last step's logged metrics."""
        try:
            if resume_from is not None and self.hooks is not None:
                state = Path(resume_from) / STATE_FILE
                if not state.is_file():
                    raise UserError(f"checkpoint {resume_from} has no {STATE_FILE}",
                                    "resume from a checkpoint-N folder that `train grpo` saved")
                self.hooks.load(state)
            self.trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
            self.trainer.save_model(str(self.output_dir))
        finally:
            self.close()
        history = [h for h in self.trainer.state.log_history if "reward" in h]
        return history[-1] if history else {}

    def close(self) -> None:
        loop = getattr(self.trainer, "async_loop", None)
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(self.client.aclose(), loop).result()
        if self.toolbox is not None:
            self.toolbox.close()


def grpo_trainer(hooks: StepHooks, difficulty_bins: Sequence[str] = (), **kwargs: Any) -> Any:
    """TRL's own GRPOTrainer, or the adaptive one (:func:`~rubricforge.training.trl_seams.adaptive_trainer`) when a
    per-step feature is on (:attr:`~rubricforge.training.adaptive.StepHooks.active`)."""
    if hooks.active:
        return adaptive_trainer(hooks, difficulty_bins=difficulty_bins, **kwargs)
    with needs("train"):
        from trl import GRPOTrainer

    return GRPOTrainer(**kwargs)


def build_grpo(cfg: Config, dataset: str | Path, model: str) -> GRPORun:
    """Check the dataset, the model's chat template, the preset and the index, then build the trainer."""
    with needs("train"):
        from datasets import Dataset
        from trl import GRPOConfig

    from rubricforge.llm import LLMClient

    e, reward = cfg.evolve, cfg.train.reward
    RewardScorer.check_name(reward)
    check_settings(cfg, reward)
    report_rl = reward in REPORT
    if report_rl and e.modes != TOOL:
        raise UserError(f"train.reward={reward} is MindDR's Report-RL, which trains without tools on the rows' own "
                        f"prompts (query, retrieval data, outline); evolve.modes={e.modes} would replace them",
                        "leave evolve.modes at its default")
    rows, gold = held_out(cfg, training_rows(dataset, [reward, *(["orm"] if e.difficulty_sampling else [])]), dataset)
    if report_rl:  # MindDR §5.3: the prompt asks for what Eqs. 10-11 score
        rows = [report_rl_prompt(r, cfg.reward.answer_tag) for r in rows]
    bins = [str(r.get("difficulty") or "") for r in rows] if e.difficulty_sampling else []
    if "" in bins:
        raise UserError(f"dataset {dataset}: evolve.difficulty_sampling needs a 'difficulty' column on every example",
                        "train on the KG export (it labels easy / medium / hard), or turn difficulty sampling off")
    args = trl_config(GRPOConfig, grpo_args(cfg, **reward_args(reward, cfg.train.loss)))
    prompts = args.generation_batch_size // args.num_generations
    steps = args.max_steps if args.max_steps > 0 else -(-len(rows) // prompts) * int(args.num_train_epochs)
    cost = grpo_cost(cfg, rows, prompts, args.num_generations, steps, args.max_completion_length)
    cost.check(cfg.llm.max_cost_usd)  # before the model loads
    tokenizer = load_tokenizer(model, cfg.train.chat_template)
    client = LLMClient(cfg.llm)
    scorer = RewardScorer(cfg, client)
    hooks = StepHooks(cfg, scorer, client, reward, bins)  # checks the evolve settings first
    # tools unless every rollout runs without them: Report-RL (MindDR §5.3), or HOTE's no-tool mode throughout
    toolbox = None if report_rl or e.modes == NO_TOOL else ToolBox.from_config(cfg)
    environments: Any = environment_factory(toolbox) if toolbox is not None else None
    if hooks.hybrid:  # TRL's per-example environments: the row's `environment` picks one (set per step)
        environments = {**({TOOL: environments} if toolbox is not None else {}), NO_TOOL: NoToolEnvironment}
        rows = [{**r, "tool_prompt": r["prompt"], "environment": TOOL if toolbox is not None else NO_TOOL} for r in rows]
    try:
        trainer = grpo_trainer(hooks, bins, model=model, reward_funcs=[grpo_reward(scorer, reward)], args=args,
                               train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                               environment_factory=environments)
    except BaseException:
        if toolbox is not None:
            toolbox.close()
        raise
    if gold:
        trainer.add_callback(gold_callback(cfg, gold, partial(greedy_reply, tokenizer=tokenizer), reward))
    note = "\n".join(filter(None, [hooks.judge_calls_per_step(rows, prompts, args.num_generations), cost.line()]))
    return GRPORun(trainer, toolbox, client, Path(args.output_dir), hooks if hooks.active else None, note)
