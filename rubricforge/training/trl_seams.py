"""TRL's private trainer methods, in one place.

rubricforge's trainers change what TRL's GRPOTrainer does inside a step, where TRL has no public hook: the HOTE
driver feeds each step's rows and a held generation (:func:`stepped_trainer`), SCORE adds its evaluator's rows
to the writer's batch (:func:`score_trainer`), and the adaptive trainer (evolving rubrics, hybrid modes, DAPO's
dynamic sampling, Search-RL's scheduler, difficulty sampling) works around generation and rewards
(:func:`adaptive_trainer`); the SFT curriculum keeps the rows' order (:func:`curriculum_sft_trainer`). Every
override or call of a private method, every private attribute read, and what they assume of TRL's batch layout
(:func:`refill_groups`, :func:`drop_flat_groups`, :func:`jsonable_generation`), sampler (:func:`difficulty_sampler`) and step
arithmetic (:func:`generation_step`) live here. :data:`PRIVATE_METHODS` lists the parameters each use expects;
``tests/training/test_trl_seams.py`` checks them against the installed TRL (and that no other module touches a private
trainer member), so an upgrade that moves a seam fails one clear test. Plain ``train grpo`` (no ``evolve``
feature on) uses TRL's GRPOTrainer itself.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from rubricforge.errors import UserError
from rubricforge.extras import needs

# The trainers' collaborators (training.adaptive.StepHooks and DifficultyWeights, training.score.ScoreLoop,
# training.stepping.TrainerThread) are typed Any here: this module sits below them and imports none of them.

STATE_FILE = "rubricforge_adaptive.json"  # the per-step state saved into every checkpoint

# GRPOTrainer's private methods rubricforge overrides or calls, with the leading parameters each use passes
# (further parameters must have defaults); private attributes read: _metrics, _tokenizer.
PRIVATE_METHODS: dict[str, tuple[str, ...]] = {
    "_generate_and_score_completions": ("self", "inputs"),  # overridden: stepped, SCORE, adaptive
    "_generate": ("self", "prompts"),  # overridden: stepped (a held generation)
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),  # adaptive
    "_get_train_sampler": ("self", "dataset"),  # overridden: SCORE (seeded per epoch), adaptive (difficulty)
    "_generate_single_turn": ("self", "prompt_ids", "images", "multimodal_fields", "num_generations"),  # SCORE
    "_get_per_token_logps_and_entropies": ("self", "model", "input_ids", "attention_mask", "logits_to_keep",
                                           "batch_size"),  # SCORE's evaluator rows
    "_log_metric": ("self", "name", "value"),  # the adaptive hooks' metrics
}
PRIVATE_ATTRIBUTES = ("_metrics", "_tokenizer")  # set in GRPOTrainer.__init__
# SFTTrainer's (transformers' Trainer's), overridden by the SFT curriculum
SFT_PRIVATE_METHODS: dict[str, tuple[str, ...]] = {"_get_train_sampler": ("self", "train_dataset")}
# transformers' Trainer's, called by every trainer after a budget stop (:func:`save_checkpoint`)
TRAINER_PRIVATE_METHODS: dict[str, tuple[str, ...]] = {"_save_checkpoint": ("self", "model", "trial")}


class Checkpointed(Protocol):
    """Per-step state a checkpoint carries (the adaptive hooks, SCORE's loop)."""

    def save(self, path: str | Path) -> None: ...


def save_state(state: Checkpointed) -> Any:
    """A TrainerCallback that saves ``state`` as :data:`STATE_FILE` into every checkpoint (main process only)."""
    with needs("train"):
        from transformers import TrainerCallback

    class SaveState(TrainerCallback):
        def on_save(self, args, trainer_state, control, **kw):
            if trainer_state.is_world_process_zero:
                state.save(Path(args.output_dir) / f"checkpoint-{trainer_state.global_step}" / STATE_FILE)

    return SaveState()


def save_checkpoint(trainer: Any) -> Path:
    """A full checkpoint of the last finished step (policy, optimiser, scheduler, RNG, trainer state, and through
    the callbacks' ``on_save`` the per-step state), as the trainer's own periodic save writes it; kept as it is
    when that step was saved already. For a run stopped between steps (a budget stop in a reward function)."""
    path = Path(trainer.args.output_dir) / f"checkpoint-{trainer.state.global_step}"
    if not (path / "trainer_state.json").is_file():
        trainer._save_checkpoint(trainer.model, None)
        trainer.control = trainer.callback_handler.on_save(trainer.args, trainer.state, trainer.control)
    return path


def log_metric(trainer: Any, name: str, value: float) -> None:
    """A scalar averaged into the trainer's next logged step (TRL's reward-function ``log_metric``)."""
    trainer._log_metric(name, value)


def record_metric(trainer: Any, name: str, value: float) -> None:
    """A scalar of this training step, logged with TRL's own (``reward``, ``kl``, ...)."""
    trainer._metrics["train"][name].append(value)


# ---------------------------------------------------------------- TRL's step arithmetic and batch layout

def generation_step(global_step: int, gradient_accumulation_steps: int, steps_per_generation: int,
                    num_iterations: int = 1) -> int:
    """The 1-based index of the generation batch that TRL is at after ``global_step`` optimiser steps: HOTE's and
    MindDR's "step" (one batch of prompts, its rollouts and rewards). TRL makes ``steps_per_generation ×
    num_iterations`` micro-batches of each generation, ``gradient_accumulation_steps`` per optimiser step."""
    micro = global_step * gradient_accumulation_steps
    return micro // (steps_per_generation * num_iterations) + 1


def flat_groups(advantages: Any, group: int) -> Any:
    """Per group of a scored generation batch, whether its rewards were all equal (every advantage 0)."""
    return (advantages.view(-1, group) == 0).all(dim=1)


def drop_flat_groups(out: dict[str, Any], group: int) -> tuple[dict[str, Any], int, int]:
    """The fallback of DAPO's dynamic-sampling filter (Yu et al. 2025; MindDR §5.3), for the flat groups
    :func:`refill_groups` could not replace: a group whose rewards are all equal carries no signal, so its
    completions are masked out of the loss and out of its token count. Returns the batch, the groups dropped, and
    the tokens removed from the loss."""
    advantages = out["advantages"]
    if advantages.numel() % group:
        return out, 0, 0
    flat = flat_groups(advantages, group).repeat_interleave(group)
    if not bool(flat.any()):
        return out, 0, 0
    mask = out["completion_mask"]
    removed = int(mask[flat].sum())
    return {**out, "completion_mask": mask * (~flat).to(mask.dtype).unsqueeze(1)}, int(flat.sum()) // group, removed


ROW_FILL = {"prompt_ids": None, "completion_ids": None, "tool_mask": 1, "importance_sampling_ratio": 1}  # None: pad id


def refill_groups(out: dict[str, Any], extra: dict[str, Any], group: int, pad_id: int) -> tuple[dict[str, Any], int]:
    """DAPO's dynamic sampling: ``out`` with its flat groups replaced, in order, by the informative groups of
    ``extra`` (another scored generation batch of the same trainer), as many as both allow; the batch keeps its
    size. Every per-row tensor is re-padded (prompts on the left, completions on the right) and
    ``num_items_in_batch`` counts the loss tokens of the rows now in the batch (one process). Returns the batch and
    the groups replaced."""
    with needs("train"):
        import torch

    flat = torch.nonzero(flat_groups(out["advantages"], group)).flatten().tolist()
    good = torch.nonzero(~flat_groups(extra["advantages"], group)).flatten().tolist()
    n = min(len(flat), len(good))
    if not n:
        return out, 0
    rows = out["advantages"].numel()
    gone = {g * group + i for g in flat[:n] for i in range(group)}
    keep = torch.tensor([r for r in range(rows) if r not in gone], device=out["advantages"].device)
    new = torch.tensor([g * group + i for g in good[:n] for i in range(group)], device=extra["advantages"].device)
    merged = dict(out)
    for key, value in out.items():
        if not (torch.is_tensor(value) and value.dim() >= 1 and value.size(0) == rows):
            continue
        if value.dim() == 1:
            merged[key] = torch.cat([value[keep], extra[key][new].to(value.device, value.dtype)])
            continue
        fill = ROW_FILL.get(key, 0)
        merged[key] = _stack(value[keep], extra[key][new], pad_id if fill is None else fill,
                             "left" if key.startswith("prompt") else "right")
    lost, gained = _loss_tokens(out)[sorted(gone)].sum(), _loss_tokens(extra)[new].sum()
    merged["num_items_in_batch"] = out["num_items_in_batch"] - lost + gained.to(lost.device)
    return merged, n


def _loss_tokens(batch: dict[str, Any]) -> Any:
    """Per row, the tokens in the loss (TRL's ``num_items_in_batch`` sums them: completion mask × tool mask)."""
    mask = batch["completion_mask"]
    return (mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask).sum(dim=1)


def jsonable_generation(out: Sequence[Any]) -> list[Any]:
    """TRL's ``_generate`` output (ids, masks, completions, log-probs, extras) as JSON for the state file."""
    if out[6] is not None or any(out[7] or []):
        raise UserError("the proposer's generation holds images", "train hote with text-only models")
    return json.loads(json.dumps([list(map(list, out[0])), list(map(list, out[1])),
                                  None if out[2] is None else list(map(list, out[2])), out[3],
                                  None if out[4] is None else list(map(list, out[4])), out[5], None, out[7]]))


def difficulty_sampler(dataset: Any, weights: Any, bins: Sequence[str], mini_repeat_count: int,
                       batch_size: int, repeat_count: int, seed: int) -> Any:
    """TRL's RepeatSampler, but each prompt of a chunk is drawn by bin weight (read when the chunk is drawn), then
    uniformly within its bin; same seed ⇒ the same sequence on every process."""
    with needs("train"):
        import torch
        from trl.trainer.utils import RepeatSampler

    by_bin: dict[str, list[int]] = defaultdict(list)
    for i, b in enumerate(bins):
        by_bin[b].append(i)

    class WeightedRepeatSampler(RepeatSampler):
        def __iter__(self):
            gen = torch.Generator().manual_seed(seed)
            for _ in range(len(self.data_source) // self.batch_size):
                names = [b for b in weights.weights if by_bin.get(b)]
                probs = torch.tensor([weights.weights[b] for b in names])
                chunk = []
                for k in torch.multinomial(probs, self.batch_size, replacement=True, generator=gen).tolist():
                    members = by_bin[names[k]]
                    chunk.append(members[int(torch.randint(len(members), (1,), generator=gen))])
                for _ in range(self.repeat_count):
                    for index in chunk:
                        yield from [index] * self.mini_repeat_count

    return WeightedRepeatSampler(dataset, mini_repeat_count, batch_size, repeat_count, shuffle=False, seed=seed)


# ---------------------------------------------------------------- the trainers

def stepped_trainer(worker: Any, **kwargs: Any) -> Any:
    """A GRPOTrainer whose generation batches are the rows the driver sends (the dataset only counts steps);
    a job may carry a held generation (``stash``), which then replaces sampling (the proposer's pending step)."""
    with needs("train"):
        from trl import GRPOTrainer

    class SteppedGRPOTrainer(GRPOTrainer):
        stash: list[Any] | None = None
        last_generation: list[Any] | None = None

        def _generate_and_score_completions(self, inputs):
            job = worker.request("ready")
            if len(job["rows"]) != len(inputs):
                raise RuntimeError(f"{worker.name}: {len(job['rows'])} rows for a batch of {len(inputs)}")
            self.stash = job.get("stash")
            return super()._generate_and_score_completions(job["rows"])

        def _generate(self, prompts):
            out = list(self.stash) if self.stash is not None else list(super()._generate(prompts))
            self.stash, self.last_generation = None, out
            return tuple(out)

    return SteppedGRPOTrainer(**kwargs)


def adaptive_trainer(hooks: Any, *args: Any, difficulty_bins: Sequence[str] = (), **kwargs: Any) -> Any:
    """A GRPOTrainer that calls ``hooks`` around generation and rewards, and saves their state in checkpoints."""
    with needs("train"):
        import torch
        from trl import GRPOTrainer

    class AdaptiveGRPOTrainer(GRPOTrainer):
        def _step_index(self):
            return generation_step(self.state.global_step, self.args.gradient_accumulation_steps,
                                   self.args.steps_per_generation, self.num_iterations)

        def _generate_and_score_completions(self, inputs):
            if hooks.hybrid:
                inputs = hooks.assign_modes(inputs, self._step_index())
            out = super()._generate_and_score_completions(inputs)
            if hooks.dynamic_sampling:
                out = self._refill(out)
                out, dropped, removed = drop_flat_groups(out, self.num_generations)
                removed_all = self.accelerator.gather(torch.tensor([removed], device=out["advantages"].device)).sum()
                out["num_items_in_batch"] = out["num_items_in_batch"] - removed_all
                record_metric(self, "dapo/dropped_groups", float(dropped))
            return out

        def _refill(self, out):
            """DAPO's refill (:func:`refill_groups`): up to ``evolve.refill_rounds`` more generations, each of as many
            prompts (seeded draws from the dataset, G rollouts each) as the batch has flat groups; one process only."""
            import random

            if self.accelerator.num_processes > 1 or out["advantages"].numel() % self.num_generations:
                return out
            step, refilled = self._step_index(), 0
            rng = random.Random(f"{self.args.seed}:refill:{step}")
            for _ in range(hooks.cfg.evolve.refill_rounds):
                need = int(flat_groups(out["advantages"], self.num_generations).sum())
                if not need:
                    break
                picks = [rng.randrange(len(self.train_dataset)) for _ in range(need)]
                rows = [dict(self.train_dataset[i]) for i in picks for _ in range(self.num_generations)]
                if hooks.hybrid:
                    rows = hooks.assign_modes(rows, step)
                extra = super()._generate_and_score_completions(rows)
                out, n = refill_groups(out, extra, self.num_generations, self._tokenizer.pad_token_id)
                refilled += n
            record_metric(self, "dapo/refilled_groups", float(refilled))
            return out

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            step = self._step_index()
            inputs = hooks.before_rewards(self, inputs, completions, step)
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            hooks.after_rewards(self, inputs, completions, step)
            return rewards

        def _get_train_sampler(self, dataset=None):
            if hooks.difficulty is None:
                return super()._get_train_sampler(dataset)
            return difficulty_sampler(dataset if dataset is not None else self.train_dataset, hooks.difficulty,
                                      difficulty_bins, self.num_generations,
                                      self.args.generation_batch_size // self.num_generations,
                                      self.num_iterations * self.args.steps_per_generation, self.args.seed)

    trainer = AdaptiveGRPOTrainer(*args, **kwargs)
    trainer.add_callback(save_state(hooks))
    return trainer


def _pad(rows: Sequence[Any], value: int, side: str) -> Any:
    with needs("train"):
        import torch
        from trl.trainer.utils import pad

    return pad([torch.as_tensor(r) for r in rows], padding_value=value, padding_side=side)


def _stack(a: Any, b: Any, value: float, side: str) -> Any:
    """Rows of ``a`` then ``b`` (2-D), the narrower padded on ``side``."""
    with needs("train"):
        import torch
        import torch.nn.functional as F

    width = max(a.size(1), b.size(1))

    def widen(t: Any) -> Any:
        extra = width - t.size(1)
        return F.pad(t, (extra, 0) if side == "left" else (0, extra), value=value) if extra else t

    return torch.cat([widen(a), widen(b.to(a.device, a.dtype))], dim=0)


def score_trainer(loop: Any, *args: Any, **kwargs: Any) -> Any:
    """A GRPOTrainer running SCORE's steps (:mod:`rubricforge.training.score`); saves the loop's state in checkpoints."""
    with needs("train"):
        import torch
        from trl import GRPOTrainer

    class ScoreGRPOTrainer(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            if not self.model.training:
                raise UserError("SCORE has no evaluation loop", "leave train.grpo_args eval_strategy at 'no'")
            step = self.state.global_step + 1
            prompts = loop.selection_prompts(inputs, step)
            ids = list(prompts)
            tok = self.processing_class
            prompt_ids = [tok.apply_chat_template(prompts[t], add_generation_prompt=True, tokenize=True,
                                                  return_dict=False) for t in ids]
            completion_ids, logprobs = self._generate_single_turn(prompt_ids, None, {}, 1)
            texts = tok.batch_decode(completion_ids, skip_special_tokens=True)
            out = super()._generate_and_score_completions(loop.condition(inputs, dict(zip(ids, texts, strict=True))))
            advantages, metrics = loop.finish(self, ids)
            for key, value in {**metrics, "score/writer_rows": float(len(inputs)),
                               "score/evaluator_rows": float(len(ids))}.items():
                record_metric(self, key, value)
            return self._with_evaluator_rows(out, prompt_ids, completion_ids, logprobs, advantages)

        def _get_train_sampler(self, dataset=None):
            """TRL's sampler, its shuffle seeded per epoch (seed + epoch): a resumed run draws the same queries
            for a step as the run it resumes (TRL's draws each epoch from one running generator)."""
            sampler = super()._get_train_sampler(dataset)
            if getattr(sampler, "generator", None) is not None and sampler.seed is not None:
                sampler.set_epoch = lambda epoch: sampler.generator.manual_seed(sampler.seed + epoch)
            return sampler

        def _with_evaluator_rows(self, out, prompt_ids, completion_ids, logprobs, advantages):
            """The generation batch plus one row per selection sample (advantage α·Â_e)."""
            device = out["prompt_ids"].device
            p_ids = _pad(prompt_ids, self._tokenizer.pad_token_id, "left").to(device)
            p_mask = _pad([[1] * len(r) for r in prompt_ids], 0, "left").to(device)
            c_ids = _pad(completion_ids, self._tokenizer.pad_token_id, "right").to(device)
            c_mask = _pad([[1] * len(r) for r in completion_ids], 0, "right").to(device)
            extra = {"prompt_ids": p_ids, "prompt_mask": p_mask, "completion_ids": c_ids, "completion_mask": c_mask}
            known = {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages",
                     "num_items_in_batch", "old_per_token_logps", "ref_per_token_logps", "sampling_per_token_logps",
                     "importance_sampling_ratio", "tool_mask"}
            if unknown := set(out) - known:
                raise UserError(f"SCORE cannot add evaluator rows to a batch with {', '.join(sorted(unknown))}",
                                "train a text-only model")
            ids = torch.cat([p_ids, c_ids], dim=1)
            mask = torch.cat([p_mask, c_mask], dim=1)
            with torch.no_grad():
                if "old_per_token_logps" in out:
                    extra["old_per_token_logps"] = self._get_per_token_logps_and_entropies(
                        self.model, ids, mask, c_ids.size(1), batch_size=self.args.per_device_train_batch_size)[0]
                if "ref_per_token_logps" in out:
                    if self.ref_model is None:
                        raise UserError("SCORE's KL term needs a reference model copy (no PEFT adapter reference)",
                                        "train without peft_config, or set score.kl=0")
                    extra["ref_per_token_logps"] = self._get_per_token_logps_and_entropies(
                        self.ref_model, ids, mask, c_ids.size(1), batch_size=self.args.per_device_train_batch_size)[0]
            if "sampling_per_token_logps" in out:  # vLLM's log-probs of the selection tokens
                extra["sampling_per_token_logps"] = _pad([[float("nan") if x is None else x for x in row]
                                                          for row in logprobs], 0, "right").to(device)
            if "importance_sampling_ratio" in out:  # no correction for the short selections: ratio 1
                ratio = out["importance_sampling_ratio"]
                extra["importance_sampling_ratio"] = torch.ones(len(prompt_ids), ratio.size(1) if ratio.size(1) == 1
                                                                else c_ids.size(1), device=device)
            if "tool_mask" in out:
                extra["tool_mask"] = torch.ones_like(c_mask)
            merged = dict(out)
            for key, value in extra.items():
                side = "left" if key.startswith("prompt") else "right"
                fill = (self._tokenizer.pad_token_id if key.endswith("_ids") else
                        1 if key in ("tool_mask", "importance_sampling_ratio") else 0)
                merged[key] = _stack(out[key], value, fill, side)
            merged["advantages"] = torch.cat([out["advantages"], torch.tensor(advantages, device=device,
                                                                              dtype=out["advantages"].dtype)])
            merged["num_items_in_batch"] = out["num_items_in_batch"] + c_mask.sum()
            return merged

    trainer = ScoreGRPOTrainer(*args, **kwargs)
    trainer.add_callback(save_state(loop))
    return trainer


def curriculum_sft_trainer(ordered: bool, **kwargs: Any) -> Any:
    """TRL's SFTTrainer; with ``ordered`` it reads the rows in dataset order (the curriculum), not shuffled."""
    with needs("train"):
        from torch.utils.data import SequentialSampler
        from trl import SFTTrainer

    if not ordered:
        return SFTTrainer(**kwargs)

    class CurriculumSFTTrainer(SFTTrainer):
        def _get_train_sampler(self, train_dataset=None):
            return SequentialSampler(train_dataset if train_dataset is not None else self.train_dataset)

    return CurriculumSFTTrainer(**kwargs)
