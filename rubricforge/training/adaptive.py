"""Training that adapts, step by step, inside TRL's GRPOTrainer (the ``evolve`` config section):

* **Evolving rubrics** (HOTE §2.2 Eq. 3, DR Tulu): once per generation batch, after the rollouts and before
  the rewards, the G responses of every task (gathered from all processes, so groups are complete) go to the
  judge, which adds positive / negative active rubrics to the task's :class:`~rubricforge.rubric_gen.bank.RubricBank`
  (one process calls the judge and broadcasts the bank); the reward then reads persistent ∪ active as the
  row's ``rubrics``; afterwards active rubrics with zero spread over the group, or beyond ``max_active``, are
  pruned to inactive. The bank is written to ``<run_dir>/evolve/bank.json`` after every step.
* **Hybrid modes** (HOTE §2.3): each prompt of a step runs in ``tool`` mode (the App. D prompt, the search /
  browse / scholar tools) or ``no_tool`` mode (one think, then the answer; no tool schema rendered), through
  TRL's per-example environments (``environment_factory`` as a dict, the row's ``environment`` field). A GRPO
  group shares its mode. Schedule ``hote``: ``no_tool_steps`` no-tool steps, then ``tool_share`` of each step's
  prompts in tool mode, drawn from a seeded permutation of the step's tasks (identical on every process).
* **DAPO's dynamic sampling** (``evolve.dynamic_sampling``, on by default for Report-RL, which MindDR §5.3 trains
  with DAPO): groups whose rollouts all earned the same reward are replaced by informative groups of further
  generations (:func:`~rubricforge.training.trl_seams.refill_groups`, up to ``evolve.refill_rounds``); those left
  are masked out of the loss (:func:`~rubricforge.training.trl_seams.drop_flat_groups`).
* **MindDR Search-RL** (§5.2): with ``train.reward=search_rl`` the coefficient scheduler is updated from each
  step's batch metrics (its λ apply from the next batch); with ``evolve.difficulty_sampling`` the rows'
  ``difficulty`` bins are drawn by weights that :class:`DifficultyWeights` moves toward the ORM-accuracy band.

A "step" here is a generation batch (its prompts, rollouts and rewards:
:func:`~rubricforge.training.trl_seams.generation_step`), as in the
papers, not one of TRL's optimiser steps, of which a batch makes ``steps_per_generation`` /
``gradient_accumulation_steps``: ``no_tool_steps``, ``difficulty_every`` and the coefficient scheduler count batches.

Everything is logged through TRL's metrics (``evolve/*``, ``search_rl/*``, ``difficulty/*``) and saved each
step to ``<run_dir>/evolve/state.json`` and into every checkpoint (``rubricforge_adaptive.json``), from which
:meth:`StepHooks.load` resumes with identical bank, λ and sampling weights.
"""

from __future__ import annotations

import asyncio
import logging
import random
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubricforge.agent.prompt import no_tool_prompt
from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.rewards.hote.rubric_reward import eq2_subset
from rubricforge.rewards.deeprubric.rubric_reward import criteria_from, weighted_mean
from rubricforge.rewards.scorer import NO_TOOL, REPORT, RUBRIC_SETS, RewardScorer, Rollout
from rubricforge.rewards.minddr.search_rl import scheduler_metrics
from rubricforge.rewards.trajectory import parse_trajectory
from rubricforge.rubric_gen.bank import BankSettings, RubricBank, prune
from rubricforge.io.files import atomic_write_json
from rubricforge.training.trl_seams import log_metric

log = logging.getLogger(__name__)
TOOL = "tool"


# ---------------------------------------------------------------- modes (HOTE §2.3, docs/methods.md H-6)

def step_modes(task_ids: Sequence[str], step: int, modes: str, no_tool_steps: int, tool_share: float = 0.5,
               seed: int = 0) -> dict[str, str]:
    """Each task's mode at ``step`` (1-based): ``tool`` / ``no_tool`` for every task, or in a hybrid step exactly
    round(share·n) of the n distinct tasks in tool mode, by a permutation seeded with (seed, step)."""
    unique = list(dict.fromkeys(task_ids))
    hybrid = modes == "hybrid" or (modes == "hote" and step > no_tool_steps)
    if not hybrid:
        return dict.fromkeys(unique, TOOL if modes == "tool" else NO_TOOL)
    order = sorted(unique)
    random.Random(f"{seed}:{step}").shuffle(order)
    n_tool = round(len(order) * tool_share)
    return {t: TOOL if i < n_tool else NO_TOOL for i, t in enumerate(order)}


def task_id(row: Mapping[str, Any]) -> str:
    return str(row.get("id") or row.get("question"))


# ---------------------------------------------------------------- difficulty (MindDR §5.2 "Dynamic Data", docs/methods.md M-3)

class DifficultyWeights:
    """Sampling weight per difficulty bin. :meth:`update`: a bin whose ORM accuracy falls outside ``band`` has its
    weight halved (floor ``floor``), inside it is unchanged; then the weights are renormalised to sum to 1.
    (The paper keeps each bin's accuracy in 10–50 % and gives no update rule; this one is docs/methods.md M-3's.)"""

    def __init__(self, bins: Sequence[str], band: tuple[float, float] = (0.1, 0.5), floor: float = 0.05):
        self.band, self.floor = band, floor
        self.weights = {b: 1 / len(bins) for b in bins}
        self.history: list[dict[str, Any]] = []

    def update(self, step: int, accuracy: Mapping[str, float]) -> dict[str, float]:
        low, high = self.band
        w = {b: (max(self.floor, v * 0.5) if b in accuracy and not low <= accuracy[b] <= high else v)
             for b, v in self.weights.items()}
        total = sum(w.values())
        old, self.weights = self.weights, {b: v / total for b, v in w.items()}
        self.history.append({"step": step, "accuracy": dict(accuracy), "old": old, "new": dict(self.weights)})
        return self.weights


# ---------------------------------------------------------------- the per-step hooks

def _gather(obj: list[Any]) -> list[Any]:
    from accelerate.utils import gather_object

    return gather_object(obj)


def _broadcast(obj: Any) -> Any:
    from accelerate.utils import broadcast_object_list

    return broadcast_object_list([obj])[0]


def _answer(completion: Any) -> str:
    traj = parse_trajectory(completion)
    return traj.answer or traj.partial_answer or "(no final answer)"


def check_settings(cfg: Config, reward: str) -> None:
    """Before anything loads: the evolve settings fit the reward."""
    if cfg.evolve.rubrics == "evolving" and reward not in RUBRIC_SETS:
        raise UserError(f"evolve.rubrics=evolving needs a reward judged per rubric, not '{reward}'",
                        f"set train.reward to one of: {', '.join(RUBRIC_SETS)}")


class StepHooks:
    """What the adaptive trainer calls around generation and rewards; owns the bank, λ and difficulty state."""

    def __init__(self, cfg: Config, scorer: RewardScorer, client: Any, reward: str, bins: Sequence[str] = ()):
        e = cfg.evolve
        self.cfg, self.scorer, self.client, self.reward = cfg, scorer, client, reward
        self.state_dir = Path(cfg.run_dir) / "evolve"
        self.bank: RubricBank | None = None
        check_settings(cfg, reward)
        if e.rubrics == "evolving":
            self.bank = RubricBank(BankSettings(e.pos_weight, e.neg_weight, e.max_active, e.max_new, e.answer_words,
                                                e.dedup_cosine, e.role))
        self.difficulty = DifficultyWeights(sorted(set(bins)), e.difficulty_band) if e.difficulty_sampling else None
        self._orm_by_bin: dict[str, list[float]] = defaultdict(list)
        self._embedder: Any = None

    @property
    def hybrid(self) -> bool:
        return self.cfg.evolve.modes != "tool"

    @property
    def dynamic_sampling(self) -> bool:
        """DAPO's dynamic sampling: ``evolve.dynamic_sampling``, by default on for Report-RL (MindDR §5.3)."""
        on = self.cfg.evolve.dynamic_sampling
        return self.reward in REPORT if on is None else on

    @property
    def active(self) -> bool:
        """Whether a per-step feature is on (evolving rubrics, hybrid modes, dynamic sampling, Search-RL's scheduler,
        difficulty sampling); without one, ``train grpo`` uses TRL's own GRPOTrainer."""
        return (self.bank is not None or self.hybrid or self.dynamic_sampling or self.reward == "search_rl"
                or self.difficulty is not None)

    # -------------------------------------------------- generation

    def assign_modes(self, inputs: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
        """Rows with this step's ``environment`` and the matching prompt (a group shares both)."""
        e = self.cfg.evolve
        ids = list(dict.fromkeys(_gather(list(dict.fromkeys(task_id(x) for x in inputs)))))
        modes = step_modes(ids, step, e.modes, e.no_tool_steps, e.tool_share, e.seed)
        out = []
        for x in inputs:
            mode = modes[task_id(x)]
            prompt = x["tool_prompt"] if mode == TOOL else no_tool_prompt(str(x["question"]))
            out.append({**x, "environment": mode, "prompt": prompt})
        return out

    # -------------------------------------------------- rewards

    def _embed(self, texts: list[str]) -> Any:
        if self._embedder is None:
            from rubricforge.corpora.embedding import Embedder

            self._embedder = Embedder.from_config(self.cfg.embedding)
        return self._embedder.embed_passages(texts)

    def before_rewards(self, trainer: Any, inputs: list[dict[str, Any]], completions: list[Any],
                       step: int) -> list[dict[str, Any]]:
        """Update the bank from this step's complete groups (Eq. 3), then give every row its bank rubrics."""
        if self.bank is None:
            return inputs
        local = [(task_id(x), str(x["question"]), x["rubrics"], _answer(c)) for x, c in zip(inputs, completions, strict=True)]
        everything = _gather(local)
        groups: dict[str, list[str]] = {}
        for tid, question, rubrics, answer in everything:
            self.bank.task(tid, question, criteria_from(rubrics, where=f"example {tid!r} rubrics"))
            groups.setdefault(tid, []).append(answer)
        state = None
        if trainer.accelerator.is_main_process:
            embed = self._embed if self.cfg.evolve.dedup_cosine < 1 else None
            results = _run(trainer, self.bank.update(self.client, groups, step, embed))
            state = {"bank": self.bank.state_dict(), "results": {
                "new_positive": sum(len(r.positive) for r in results.values()),
                "new_negative": sum(len(r.negative) for r in results.values()),
                "duplicates": sum(r.duplicates for r in results.values()),
                "deleted": sum(len(r.deleted) for r in results.values()),
                "update_failed": sum(r.failed for r in results.values())}}
        if trainer.accelerator.num_processes > 1:
            state = _broadcast(state)
            self.bank.load_state_dict(state["bank"])
        assert state is not None  # computed by the main process (and broadcast to the others)
        for key, value in state["results"].items():
            log_metric(trainer, f"evolve/{key}", float(value))
        return [{**x, "rubrics": [i.criterion().model_dump(mode="json")
                                  for i in self.bank.tasks[task_id(x)].scored()]} for x in inputs]

    def after_rewards(self, trainer: Any, inputs: list[dict[str, Any]], completions: list[Any], step: int) -> None:
        """Prune the bank with this step's judgments, update λ and difficulty weights, log, save."""
        environments = getattr(trainer, "environments", None) or [None] * len(inputs)
        rollouts = [Rollout(x, c, getattr(env, "snippets", None)) for x, c, env in zip(inputs, completions, environments, strict=True)]
        if self.bank is not None:
            self._prune(trainer, inputs, rollouts)
        if self.reward == "search_rl":
            self._schedule(trainer, rollouts, step)
        if self.difficulty is not None:
            self._difficulty(trainer, inputs, rollouts, step)
        if trainer.accelerator.is_main_process:
            self.save(self.state_dir / "state.json")
            if self.bank is not None:
                self.bank.save(self.state_dir / "bank.json")

    def _details(self, trainer: Any, name: str, rollouts: list[Rollout]) -> list[dict[str, Any]]:
        async def all_details():
            return await asyncio.gather(*(self.scorer.details(name, r) for r in rollouts))

        return _run(trainer, all_details())

    def _prune(self, trainer: Any, inputs: list[dict[str, Any]], rollouts: list[Rollout]) -> None:
        bank = self.bank
        assert bank is not None  # pruning is called only when the rubric bank is on
        kind = RUBRIC_SETS[self.reward]
        details = self._details(trainer, kind, rollouts)
        everything = _gather([(task_id(x), d.get("per_criterion") or {}) for x, d in zip(inputs, details, strict=True)])
        judgments: dict[str, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
        persistent, active = [], []
        for tid, per in everything:
            tr = bank.tasks[tid]
            for rid, value in per.items():
                judgments[tid][rid].append(value)
            rubrics = [i.criterion() for i in tr.scored()]
            persistent.append(_subset_reward(kind, per, rubrics, {i.id for i in tr.persistent}))
            active.append(_subset_reward(kind, per, rubrics, {i.id for i in tr.active}))
        zero, cap = 0, 0
        for tid, per in judgments.items():
            got = prune(bank.tasks[tid], per, bank.settings.max_active)
            zero, cap = zero + len(got.zero_std), cap + len(got.cap)
        tasks = [bank.tasks[t] for t in judgments]
        metrics = {"evolve/pruned_zero_std": zero, "evolve/pruned_cap": cap,
                   "evolve/active_mean": statistics.fmean(len(t.active) for t in tasks),
                   "evolve/inactive_mean": statistics.fmean(len(t.inactive) for t in tasks)}
        for name, values in (("persistent", persistent), ("active", active)):
            scored = [v for v in values if v is not None]
            if scored:
                metrics[f"evolve/reward_{name}"] = statistics.fmean(scored)
        for key, value in metrics.items():
            log_metric(trainer, key, float(value))

    def _schedule(self, trainer: Any, rollouts: list[Rollout], step: int) -> None:
        """MindDR §5.2: the scheduler sees the step's batch metrics (all processes), λ apply from the next batch."""
        details = _gather(self._details(trainer, "search_rl", rollouts))
        scheduler = self.scorer.scheduler
        metrics = scheduler_metrics(details)
        try:
            scheduler.update(step, metrics)
        except ValueError as exc:  # a phase's metric is undefined this step (e.g. no tool call at all)
            log.info("coefficient scheduler not updated at step %d: %s", step, exc)
        for key, value in {**metrics, **{f"lambda_{k}": v for k, v in scheduler.weights.as_dict().items()}}.items():
            log_metric(trainer, f"search_rl/{key}", float(value))
        log_metric(trainer, "search_rl/transitions", float(len(scheduler.transitions)))

    def _difficulty(self, trainer: Any, inputs: list[dict[str, Any]], rollouts: list[Rollout], step: int) -> None:
        """ORM accuracy per difficulty bin over the training rollouts of the last ``difficulty_every`` steps
        (the paper samples a validation set; the training groups cost no extra generation)."""
        difficulty = self.difficulty
        assert difficulty is not None  # called only with difficulty sampling on
        details = self._details(trainer, "orm", rollouts)
        for tier, value in _gather([(str(x.get("difficulty")), d["value"]) for x, d in zip(inputs, details, strict=True)]):
            if value is not None:
                self._orm_by_bin[tier].append(value)
        if step % self.cfg.evolve.difficulty_every == 0 and self._orm_by_bin:
            accuracy = {b: statistics.fmean(v) for b, v in self._orm_by_bin.items() if v}
            difficulty.update(step, accuracy)
            self._orm_by_bin.clear()
        for b, w in difficulty.weights.items():
            log_metric(trainer, f"difficulty/weight_{b}", float(w))

    # -------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        return {"bank": self.bank.state_dict() if self.bank is not None else None,
                "scheduler": self.scorer.scheduler.state_dict(),
                "difficulty": None if self.difficulty is None else {
                    "weights": self.difficulty.weights, "history": self.difficulty.history,
                    "pending": {b: list(v) for b, v in self._orm_by_bin.items()}}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self.bank is not None and state.get("bank"):
            self.bank.load_state_dict(state["bank"])
        self.scorer.scheduler.load_state_dict(state["scheduler"])
        if self.difficulty is not None and state.get("difficulty"):
            self.difficulty.weights = dict(state["difficulty"]["weights"])
            self.difficulty.history = list(state["difficulty"]["history"])
            self._orm_by_bin = defaultdict(list, {b: list(v) for b, v in state["difficulty"]["pending"].items()})

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.state_dict())

    def load(self, path: str | Path) -> None:
        import json

        self.load_state_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def judge_calls_per_step(self, rows: Sequence[Mapping[str, Any]], prompts_per_step: int, group: int) -> str:
        """The judge calls one step costs, for the start-of-run line."""
        if self.bank is None:
            return ""
        persistent = statistics.fmean(len(r.get("rubrics") or []) for r in rows)
        top = persistent + self.bank.settings.max_active
        return (f"evolving rubrics: {prompts_per_step} update calls + {prompts_per_step} x {group} responses x "
                f"{persistent:.1f}-{top:.1f} rubrics = {prompts_per_step * group * persistent:.0f}-"
                f"{prompts_per_step * group * top:.0f} rubric judge calls per step")


def _subset_reward(kind: str, per: Mapping[str, float | None], rubrics: list[Any], ids: set[str]) -> float | None:
    """The reward restricted to the rubrics of ``ids``: Eq. 2 (``hote``) or DeepRubric Eq. 4 (``rubric``)."""
    subset = [r for r in rubrics if r.id in ids]
    if not subset or any(per.get(r.id) is None for r in subset):
        return None
    if kind == "hote":
        from rubricforge.rewards.hote.rubric_reward import HoteScore

        return eq2_subset(HoteScore(None, dict(per)), rubrics, ids)  # type: ignore[arg-type]
    if not any(r.weight > 0 for r in subset):
        return None
    return weighted_mean(per, subset)  # type: ignore[arg-type]


def _run(trainer: Any, coro: Any) -> Any:
    """Run ``coro`` on TRL's reward event loop (where the LLM client lives) and wait for it."""
    return asyncio.run_coroutine_threadsafe(coro, trainer.async_loop).result()
