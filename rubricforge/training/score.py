"""`rubricforge train score`: SCORE's shared-parameter writer / evaluator self-play through TRL's GRPOTrainer
(SCORE §3.3–3.6, Algorithms 1–2; docs/methods.md S-1–S-6).

One policy plays both roles. Each step (one TRL generation batch of B queries × K rollouts):

1. **Evaluator selects a rubric** (Alg. 1 l.8–13): per query, the policy writes a ``<dimensions>`` block from the
   prompt x^rubric (query, harness ℳ_{t−1}, dimension pool, scheduler hints / avoided). An invalid block gives
   the solver the default rubric (must_include at weight 1.0) and that sample R_e = 0.
2. **Writer** (Alg. 1 l.15–17): TRL's GRPO rollouts with the tools, the selected rubric appended to the request.
3. **Evaluator assesses** (l.20–23): one search-assisted assessment per query scores its K reports by the
   ``score.evaluator_role`` model; R_s = a(r)(1 + Σ w s) with the reward verifier (depth < τ_s ⇒ 0 or None).
4. **Consistency** (Alg. 2): C_i over all K(K−1)/2 pairs of the query's K conclusions (an unanswered rollout agrees
   with none), R_eval = mean C_i over valid selections, b_t = β b_{t−1} + (1 − β) R_eval. Each selection is credited
   from its own query: Â_e,i = C_i − b_{t−1} (Alg. 1 samples one rubric per step, for which the two agree; with a
   selection per query, §3.4, the batch mean would give every selection the same advantage).
5. **Shared update** (§3.6, Prop. 2's single combined loss): the B selection samples join the generation batch as
   extra rows with advantage α·Â_e,i (α·(0 − b_{t−1}) for an invalid one), so one GRPO step trains the writer on
   group-normalised R_s and the evaluator by REINFORCE (on-policy, the clipped ratio is 1), both with TRL's k3 KL
   at β = ``score.kl`` (0.05) in the loss, never in the reward.
6. **Scheduler and harness** (l.34–39): UpdateStats with the step's dimensions and R_eval; every M steps the
   ``score.harness_role`` model writes ℳ_t (an invalid answer keeps ℳ_{t−1}).

Everything the next step's inputs depend on (pool, scheduler, harness, baseline, recent statistics) is written to
``<run_dir>/score/state.json`` after every step and into every checkpoint, so ``--resume-from`` continues with
identical inputs. The assessment runs on the configured LLM role ``score.evaluator_role`` (a stronger fixed
judge), or with ``score.assessor=policy`` on the training weights themselves (:class:`PolicyAssessor`): the
paper's shared actor, which assesses with its current weights while only its rubric selection is trained.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.corpora.tools import ToolBox
from rubricforge.errors import UserError
from rubricforge.extras import needs
from rubricforge.rewards.format_reward import format_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.score import Assessment, EmaBaseline, assess, extract_conclusion, pairwise_consistency
from rubricforge.rewards.score import score_report_reward, verified
from rubricforge.rewards.trajectory import parse_trajectory
from rubricforge.rubric_gen.score_dims import (DimensionScheduler, Harness, Selection, default_selection, harness_due,
                                               harness_statistics, parse_selection, refresh_harness,
                                               selection_messages)
from rubricforge.rundir import atomic_write_json
from rubricforge.training.adaptive import STATE_FILE, _run, task_id

STATE_DIR = "score"


@dataclass
class StepRecord:
    """What one step's evaluator chose and what it earned (kept in the state's history)."""

    step: int
    selections: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # query id -> Selection or None
    invalid: dict[str, str] = field(default_factory=dict)  # query id -> why its selection was rejected
    assessments: dict[str, Assessment | None] = field(default_factory=dict)
    answers: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    rewards: list[float | None] = field(default_factory=list)
    zeroed: int = 0


class ScoreLoop:
    """SCORE's per-step state and logic around the trainer (owns pool, scheduler, harness, EMA baseline)."""

    def __init__(self, cfg: Config, client: Any, toolbox: ToolBox | None):
        s = cfg.score
        self.cfg, self.client, self.toolbox = cfg, client, toolbox
        self.judge: Judge | PolicyAssessor = Judge(client, s.evaluator_role)  # the policy's with score.assessor=policy
        self.scheduler = DimensionScheduler()
        self.harness = Harness()
        self.baseline = EmaBaseline(s.ema_beta)
        self.recent: list[dict[str, Any]] = []  # per-step statistics since the last harness refresh
        self.history: list[dict[str, Any]] = []
        self.state_dir = Path(cfg.run_dir) / STATE_DIR
        self.current: StepRecord | None = None

    # -------------------------------------------------- phase 1-2: the evaluator's rubric selection

    def selection_prompts(self, inputs: Sequence[Mapping[str, Any]], step: int) -> dict[str, list[dict[str, str]]]:
        """x^rubric for each distinct query of the batch (query id -> chat messages)."""
        self.current = StepRecord(step)
        constraints = self.scheduler.constraints(self.harness.dimension_constraints.must_include)
        out = {}
        for x in inputs:
            tid = task_id(x)
            if tid not in out:
                out[tid] = selection_messages(str(x["question"]), self.harness, self.scheduler.pool, constraints)
        return out

    def condition(self, inputs: Sequence[Mapping[str, Any]], texts: Mapping[str, str]) -> list[dict[str, Any]]:
        """Parse each query's selection; the writer rows get the rubric appended to their request (Alg. 1 l.16)."""
        rec = self.current
        assert rec is not None  # selection_prompts started the step
        chosen: dict[str, Selection] = {}
        for tid, text in texts.items():
            got, why = parse_selection(text, self.harness, self.scheduler.pool)
            rec.selections[tid] = got.as_json() if got is not None else None
            if got is None:
                rec.invalid[tid] = why
            chosen[tid] = got or default_selection(self.harness)
        rows = []
        for x in inputs:
            sel = chosen[task_id(x)]
            prompt = [dict(m) for m in x["prompt"]]
            prompt[-1]["content"] = f"{prompt[-1]['content']}\n\n{sel.describe()}"
            rows.append({**x, "prompt": prompt, "score_rubric": json.dumps(sel.as_json())})
        return rows

    # -------------------------------------------------- phase 4: assessment and R_s (the TRL reward function)

    async def rewards(self, completions: Sequence[Any], rows: Sequence[Mapping[str, Any]]) -> list[float | None]:
        rec = self.current
        assert rec is not None
        trajs = [parse_trajectory(c) for c in completions]
        groups: dict[str, list[int]] = defaultdict(list)
        for i, x in enumerate(rows):
            groups[task_id(x)].append(i)
        process = self.harness.process_constraints
        reports = {tid: [trajs[i].answer or trajs[i].partial_answer or "(no final answer)" for i in idx]
                   for tid, idx in groups.items()}
        selections = {tid: Selection.from_json(json.loads(rows[idx[0]]["score_rubric"])) for tid, idx in groups.items()}
        s = self.cfg.score
        found = await asyncio.gather(*(
            assess(self.judge, self.toolbox, str(rows[idx[0]]["question"]), reports[tid], selections[tid].weights,
                   selections[tid].primary, process.model_dump(), self.harness.notes, s.max_search_turns,
                   s.report_words) for tid, idx in groups.items()))
        out: list[float | None] = [None] * len(rows)
        for (tid, idx), assessment in zip(groups.items(), found, strict=True):
            rec.assessments[tid] = assessment
            rec.answers[tid] = [trajs[i].answer or "" for i in idx]
            weights = selections[tid].weights
            if assessment is None:
                continue  # the whole group unscored
            for n, i in enumerate(idx):
                scores = assessment.scores[n]
                if scores is None:
                    continue
                valid = format_reward(trajs[i]).components["answer"]  # a(r): a closed, non-empty <answer>
                raw = score_report_reward(valid, list(weights.values()), [scores[d] for d in weights])
                out[i] = verified(raw, assessment.depth, process.min_number_of_tool_call, s.verifier_mode)
                rec.zeroed += int(assessment.depth < process.min_number_of_tool_call)
        rec.rewards = out
        return out

    # -------------------------------------------------- phases 6-7: consistency, baseline, scheduler, harness

    def finish(self, trainer: Any, query_ids: Sequence[str]) -> tuple[list[float], dict[str, float]]:
        """Alg. 2 and Alg. 1 l.34–39; returns the evaluator advantage α·Â_e of each query in ``query_ids`` and the
        step's metrics. Saves the state."""
        rec = self.current
        assert rec is not None
        consistency = {tid: pairwise_consistency([extract_conclusion(a) for a in rec.answers.get(tid, [])])
                       for tid in query_ids}
        valid = [tid for tid in query_ids if rec.selections.get(tid) is not None]
        signal = [c for tid in valid if (c := consistency[tid]) is not None]
        previous = self.baseline.value
        r_eval = statistics.fmean(signal) if signal else None
        advantage = self.baseline.advantage(r_eval) if r_eval is not None else 0.0  # b_t from the batch (Alg. 2)
        alpha = self.cfg.score.alpha
        # each selection is credited from its own query's rollouts: α(C_i − b_{t−1}); an invalid one: α(0 − b_{t−1})
        advantages = [alpha * ((consistency[tid] or 0.0) if tid in valid else 0.0) - alpha * previous
                      for tid in query_ids]
        scored = [r for r in rec.rewards if r is not None]
        reward_mean = statistics.fmean(scored) if scored else None
        if r_eval is not None:
            dims = [d for tid in valid for d in (rec.selections[tid] or {})["weights"]]
            self.scheduler.update(dims, r_eval, reward_mean)
        depths = [a.depth for a in rec.assessments.values() if a is not None]
        stats = {"step": rec.step, "r_eval": r_eval, "reward_mean": reward_mean,
                 "reward_std": statistics.pstdev(scored) if len(scored) > 1 else None,
                 "verifier_zeroed": rec.zeroed / len(rec.rewards) if rec.rewards else None,
                 "search_calls": statistics.fmean(depths) if depths else None,
                 "invalid_share": len(rec.invalid) / len(query_ids)}
        self.recent.append(stats)
        refreshed = None
        if harness_due(rec.step, self.cfg.score.harness_every):
            snapshot = harness_statistics(self.scheduler, self.recent, self.harness, self.baseline.value)
            self.harness, self.scheduler.pool, why = _run(trainer, refresh_harness(
                self.client, self.cfg.score.harness_role, snapshot, self.harness, self.scheduler.pool))
            refreshed = why is None
            self.recent = []
        self.history.append({**stats, "baseline": self.baseline.value, "advantage": advantage,
                             "selections": rec.selections, "invalid": rec.invalid,
                             "consistency": consistency, "harness_refreshed": refreshed})
        self.save(self.state_dir / "state.json")
        metrics = {"score/r_eval": r_eval if r_eval is not None else float("nan"), "score/advantage_e": advantage,
                   "score/baseline": self.baseline.value, "score/invalid_selections": float(len(rec.invalid)),
                   "score/verifier_zeroed": float(rec.zeroed),
                   "score/evaluator_searches": statistics.fmean(depths) if depths else float("nan"),
                   "score/judge_calls": float(sum(a.calls for a in rec.assessments.values() if a is not None)
                                              + (refreshed is not None))}
        return advantages, metrics

    # -------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict(), "harness": self.harness.model_dump(mode="json"),
                "baseline": self.baseline.value, "recent": self.recent, "history": self.history}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.harness = Harness.model_validate(state["harness"])
        self.baseline.value = float(state["baseline"])
        self.recent, self.history = list(state["recent"]), list(state["history"])

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.state_dict())

    def load(self, path: str | Path) -> None:
        self.load_state_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def judge_calls_per_step(self, prompts_per_step: int) -> str:
        s = self.cfg.score
        return (f"SCORE: {prompts_per_step} assessments per step, each 1 + up to {s.max_search_turns - 1} search turns "
                f"({prompts_per_step}-{prompts_per_step * s.max_search_turns} evaluator calls), plus 1 harness call "
                f"every {s.harness_every} steps")


class PolicyAssessor:
    """The shared actor as the evaluator's assessor (SCORE §3.4–3.6: one policy selects the rubric *and* assesses
    the reports): :meth:`ask_messages` answers an assessment turn with the training weights (chat template,
    sampling at ``score.temperature``, at most ``score.assess_tokens`` tokens, no gradient), reading the answer as
    ``output.from_text``; an unreadable answer is re-asked with the reason once, then unscored (None). Only the
    selection is trained (REINFORCE), as in the paper; the assessment reads the current weights."""

    def __init__(self, model: Any, tokenizer: Any, temperature: float, max_tokens: int):
        self.model, self.tokenizer, self.temperature, self.max_tokens = model, tokenizer, temperature, max_tokens
        self.calls = 0

    def _generate(self, messages: list[dict[str, str]]) -> str:
        with needs("train"):
            import torch

        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                 return_dict=True).to(self.model.device)
        with torch.no_grad():
            out = self.model.generate(**ids, max_new_tokens=self.max_tokens, do_sample=True,
                                      temperature=self.temperature)
        return self.tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)

    async def ask_messages(self, messages: list[dict[str, str]], output: type[Any], *, stage: str,
                           seed: int | None = None) -> Any:
        for _ in range(2):
            self.calls += 1
            text = self._generate(messages)
            try:
                return output.from_text(text)
            except ValueError as exc:
                messages = [*messages, {"role": "assistant", "content": text},
                            {"role": "user", "content": f"That answer could not be read ({exc}). Answer in the format: "
                                                        f"{output.FORMAT}"}]
        return None


# ---------------------------------------------------------------- the trainer

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


def score_trainer(loop: ScoreLoop, *args: Any, **kwargs: Any) -> Any:
    """A GRPOTrainer running SCORE's steps (module docstring); saves the loop's state in checkpoints."""
    with needs("train"):
        import torch
        from transformers import TrainerCallback
        from trl import GRPOTrainer

    class SaveState(TrainerCallback):
        def on_save(self, args, state, control, **kw):
            if state.is_world_process_zero:
                loop.save(Path(args.output_dir) / f"checkpoint-{state.global_step}" / STATE_FILE)

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
            for key, value in metrics.items():
                self._metrics["train"][key].append(value)
            self._metrics["train"]["score/writer_rows"].append(float(len(inputs)))
            self._metrics["train"]["score/evaluator_rows"].append(float(len(ids)))
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
    trainer.add_callback(SaveState())
    return trainer


def score_reward(loop: ScoreLoop) -> Any:
    """The writer's TRL reward: R_s of each rollout (None = unscored, left out of its group)."""

    async def score_report(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        rows = [dict(zip(("question", "id", "score_rubric"), v, strict=True))
                for v in zip(kwargs["question"], kwargs.get("id") or [None] * len(completions), kwargs["score_rubric"],
                             strict=True)]
        return await loop.rewards(completions, rows)

    return score_report


def score_args(cfg: Config) -> Any:
    """The ``GRPOConfig``: preset < SCORE's own settings (App. G Table 2, :func:`~rubricforge.training.grpo.paper_args`)
    < its KL and temperature < ``train.grpo_args``; the evaluator rows must split evenly into the micro-batches."""
    with needs("train"):
        from trl import GRPOConfig

    from rubricforge.training.grpo import grpo_args, paper_args, trl_config

    s = cfg.score
    args = trl_config(GRPOConfig, grpo_args(cfg, "score", **paper_args(cfg, "score"), beta=s.kl, temperature=s.temperature))
    prompts = args.generation_batch_size // args.num_generations
    if (args.generation_batch_size + prompts) % args.steps_per_generation:
        raise UserError(f"SCORE adds {prompts} evaluator rows to each generation batch of {args.generation_batch_size}; "
                        f"the {args.generation_batch_size + prompts} rows do not split into steps_per_generation = "
                        f"{args.steps_per_generation} equal micro-batches",
                        "set train.grpo_args so that generation_batch_size = per_device_train_batch_size "
                        "(one micro-batch per generation)")
    return args


def build_score(cfg: Config, dataset: str | Path, model: str) -> Any:
    """Check the dataset, model, settings and index, then build the SCORE trainer (a :class:`GRPORun`)."""
    with needs("train"):
        from datasets import Dataset

    from rubricforge.llm import LLMClient
    from rubricforge.training.cost import score_cost
    from rubricforge.training.data import training_rows
    from rubricforge.training.environment import environment_factory
    from rubricforge.training.grpo import GRPORun
    from rubricforge.training.model import load_tokenizer

    for role in (cfg.score.evaluator_role, cfg.score.harness_role):
        cfg.llm.role(role)  # an unknown role fails now, not at step 1 or M
    rows = training_rows(dataset, [])
    args = score_args(cfg)
    prompts = args.generation_batch_size // args.num_generations
    steps = args.max_steps if args.max_steps > 0 else -(-len(rows) // prompts) * int(args.num_train_epochs)
    cost = score_cost(cfg, rows, prompts, args.num_generations, steps, args.max_completion_length)
    cost.check(cfg.llm.max_cost_usd)
    tokenizer = load_tokenizer(model, cfg.train.chat_template)
    client = LLMClient(cfg.llm)
    toolbox = ToolBox.from_config(cfg)
    try:
        loop = ScoreLoop(cfg, client, toolbox)
        trainer = score_trainer(loop, model=model, reward_funcs=[score_reward(loop)], args=args,
                                train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                                environment_factory=environment_factory(toolbox))
    except BaseException:
        toolbox.close()
        raise
    if cfg.score.assessor == "policy":
        loop.judge = PolicyAssessor(trainer.model, tokenizer, cfg.score.temperature, cfg.score.assess_tokens)
    if trainer.accelerator.num_processes > 1:
        toolbox.close()
        raise UserError("train score runs on one process (its groups and evaluator rows are not gathered across "
                        "processes)", "launch it without accelerate's multi-process launcher")
    return GRPORun(trainer, toolbox, client, Path(args.output_dir), loop, f"{loop.judge_calls_per_step(prompts)}\n{cost.line()}")
