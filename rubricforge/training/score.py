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
from functools import partial
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.corpora.tools import ToolBox
from rubricforge.errors import UserError
from rubricforge.extras import needs
from rubricforge.rewards.deeprubric.format_reward import format_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.score.evaluator import (
    Assessment,
    EmaBaseline,
    assess,
    extract_conclusion,
    pairwise_consistency,
    score_report_reward,
    verified,
)
from rubricforge.rewards.trajectory import parse_trajectory
from rubricforge.rubric_gen.score_dims import (
    DimensionScheduler,
    Harness,
    Selection,
    default_selection,
    harness_due,
    harness_statistics,
    parse_selection,
    refresh_harness,
    selection_messages,
)
from rubricforge.io.files import atomic_write_json
from rubricforge.training.adaptive import _run, task_id
from rubricforge.training.trl_seams import score_trainer

STATE_DIR = "score"


@dataclass
class ScoreStep:
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
        self.current: ScoreStep | None = None

    # -------------------------------------------------- phase 1-2: the evaluator's rubric selection

    def selection_prompts(self, inputs: Sequence[Mapping[str, Any]], step: int) -> dict[str, list[dict[str, str]]]:
        """x^rubric for each distinct query of the batch (query id -> chat messages)."""
        self.current = ScoreStep(step)
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

    def _sample(self, messages: list[dict[str, str]]) -> str:
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
            text = self._sample(messages)
            try:
                return output.from_text(text)
            except ValueError as exc:
                messages = [*messages, {"role": "assistant", "content": text},
                            {"role": "user", "content": f"That answer could not be read ({exc}). Answer in the format: "
                                                        f"{output.FORMAT}"}]
        return None


# ---------------------------------------------------------------- the trainer (its GRPOTrainer: trl_seams.score_trainer)

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
    from rubricforge.training.presets import optimiser_steps_per_generation

    s = cfg.score
    args = trl_config(GRPOConfig, grpo_args(cfg, "score", **paper_args(cfg, "score"), beta=s.kl, temperature=s.temperature))
    if cfg.train.preset == "paper" and "warmup_steps" not in cfg.train.grpo_args:  # Table 2's warm-up counts SCORE steps
        args.warmup_steps = s.warmup * optimiser_steps_per_generation(args)
    prompts = args.generation_batch_size // args.num_generations
    if (args.generation_batch_size + prompts) % args.steps_per_generation:
        raise UserError(f"SCORE adds {prompts} evaluator rows to each generation batch of {args.generation_batch_size}; "
                        f"the {args.generation_batch_size + prompts} rows do not split into steps_per_generation = "
                        f"{args.steps_per_generation} equal micro-batches",
                        "set train.grpo_args so that generation_batch_size = per_device_train_batch_size "
                        "(one micro-batch per generation)")
    return args


def fitting(rows: list[dict[str, Any]], tokenizer: Any, limit: int | None) -> tuple[list[dict[str, Any]], int]:
    """The rows whose writer prompt (chat template, generation prompt added) has at most ``limit`` tokens (Table 2's
    maximum input length), and how many were left out."""
    if limit is None:
        return rows, 0
    kept = [r for r in rows if len(tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True,
                                                                 tokenize=True, return_dict=False)) <= limit]
    return kept, len(rows) - len(kept)


def build_score(cfg: Config, dataset: str | Path, model: str) -> Any:
    """Check the dataset, model, settings and index, then build the SCORE trainer (a :class:`GRPORun`)."""
    with needs("train"):
        from datasets import Dataset

    from rubricforge.agent.environment import environment_factory
    from rubricforge.agent.rows import training_rows
    from rubricforge.evaluation.gold import gold_callback, held_out
    from rubricforge.llm import LLMClient
    from rubricforge.training.cost import score_cost
    from rubricforge.training.grpo import GRPORun
    from rubricforge.training.model import greedy_reply, load_tokenizer

    for role in (cfg.score.evaluator_role, cfg.score.harness_role):
        cfg.llm.role(role)  # an unknown role fails now, not at step 1 or M
    rows, gold = held_out(cfg, training_rows(dataset, []), dataset)
    args = score_args(cfg)  # the settings fail before the model is read
    tokenizer = load_tokenizer(model, cfg.train.chat_template)
    rows, too_long = fitting(rows, tokenizer, cfg.score.max_input_tokens)
    if not rows:
        raise UserError(f"every training row of {dataset} is longer than score.max_input_tokens = "
                        f"{cfg.score.max_input_tokens} tokens", "raise score.max_input_tokens (or set it to null)")
    prompts = args.generation_batch_size // args.num_generations
    steps = args.max_steps if args.max_steps > 0 else -(-len(rows) // prompts) * int(args.num_train_epochs)
    cost = score_cost(cfg, rows, prompts, args.num_generations, steps, args.max_completion_length)
    cost.check(cfg.llm.max_cost_usd)
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
    if gold:
        trainer.add_callback(gold_callback(cfg, gold, partial(greedy_reply, tokenizer=tokenizer)))
    if cfg.score.assessor == "policy":
        loop.judge = PolicyAssessor(trainer.model, tokenizer, cfg.score.temperature, cfg.score.assess_tokens)
    if trainer.accelerator.num_processes > 1:
        toolbox.close()
        raise UserError("train score runs on one process (its groups and evaluator rows are not gathered across "
                        "processes)", "launch it without accelerate's multi-process launcher")
    dropped = f"\n{too_long} rows left out: prompt over {cfg.score.max_input_tokens} tokens" if too_long else ""
    return GRPORun(trainer, toolbox, client, Path(args.output_dir), loop,
                   f"{loop.judge_calls_per_step(prompts)}\n{cost.line()}{dropped}")
