"""`rubricforge train hote`: HOTE's self-play driver (§2.2–2.3, Algorithm 1; docs/methods.md H-5–H-7).

Per step t: the batch S is B real tasks at step 1, later the synthetic tasks proposed at t−1 plus real tasks to
fill B (B/2 each; an invalid proposal's slot goes to a real task). Modes (``hote.modes``): real tasks by a
seeded permutation, synthetic tasks per proposer group. The **solver** rolls out G times per task; its reward
function updates each task's active rubrics from the G responses (Eq. 3), scores them with persistent ∪ active
(Eq. 2, one binary judge call per rubric and response), records the judgments J and each task's weaknesses (the
input of Eq. 4, taken before anything is retired). Only the judge retires an active rubric (its update's
``delete_ids``, as in HOTE); ``hote.retire=spread`` adds DR Tulu's pruning (zero spread over the group, cap
``evolve.max_active``), which HOTE does not have. Then the **proposer** is updated on the proposals of t−1 with
Eq. 5 from those synthetic tasks' J; then N pairwise-distinct combinations of S each get meta rubrics from the
judge (Eq. 4) and G′ proposals from the proposer. A valid proposal (non-empty, ≤ ``hote.max_task_words`` words, no
13-gram shared with a training or benchmark query: the quality gate's
:class:`~rubricforge.pipelines.quality.decontam.Decontaminator`) becomes a synthetic task whose persistent rubrics
are its group's meta rubrics; an invalid one gets r^p = 0.

Both policies train with TRL's GRPOTrainer (:func:`~rubricforge.training.grpo.grpo_args`: preset, loss,
generation backend), each in its own thread running its own ``train()``; the driver hands each trainer one
step's rows at a time and waits for it, so exactly one of them runs at any moment. The proposer's GRPO step
for the proposals of step t is its generation at t, held (in its reward function) until the solver has
answered them at t+1 — TRL's advantages, old log-probabilities and loss then apply unchanged. One process
only (the reward needs whole groups; the two trainers share it).

Saved after every step to ``<run_dir>/hote/state.json`` (atomic): the step, the proposer's update count (it lags
after a step that proposed nothing because a meta call failed), the rubric bank (a synthetic task leaves it once
solved and rewarded), the synthetic tasks for the next step, the pending proposal groups with the proposer's
generation (token ids); ``steps.jsonl`` gets the step's record; each trainer checkpoints every step under
``<run_dir>/hote/{solver,proposer}``. A run started again on the same run directory resumes from the last saved
step with identical inputs (the last step's proposals wait there for a longer run; the held proposer step is
replayed from the saved token ids). The policies end in ``<run_dir>/hote/*/final``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rubricforge.agent.prompt import agent_prompt, no_tool_prompt
from rubricforge.agent.rows import training_rows
from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.evaluation.gold import gold_callback, held_out
from rubricforge.extras import needs
from rubricforge.rewards.deeprubric.rubric_reward import criteria_from
from rubricforge.rewards.hote.rubric_reward import hote_reward, proposer_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.scorer import NO_TOOL
from rubricforge.rewards.trajectory import parse_trajectory
from rubricforge.rubric_gen.bank import BankSettings, RubricBank, RubricItem, TaskRubrics, prune
from rubricforge.rubric_gen.meta_rubrics import Weakness, combinations, meta_rubrics, proposer_messages, weaknesses
from rubricforge.io.files import atomic_write_json
from rubricforge.training.adaptive import TOOL, step_modes
from rubricforge.training.cost import hote_cost
from rubricforge.training.grpo import response_tokens
from rubricforge.training.stepping import TrainerThread
from rubricforge.training.trl_seams import jsonable_generation, stepped_trainer

log = logging.getLogger(__name__)
STATE = "state.json"
STEPS = "steps.jsonl"  # one line per finished step: batch, modes, rewards, judge calls, timings


# ---------------------------------------------------------------- validity of a proposed task (docs/methods.md H-5)

class TaskValidity:
    """Why a proposed task is invalid (None: valid): empty, longer than ``max_words``, or sharing an n-gram
    with a training or benchmark query (:class:`Decontaminator`, n-grams only)."""

    def __init__(self, cfg: Config, training_queries: Sequence[tuple[str, str]]):
        from rubricforge.pipelines.quality.decontam import BenchmarkItem, Decontaminator, benchmark_items

        q = cfg.quality
        items = [BenchmarkItem("training set", i, text) for i, text in training_queries]
        self.guard = Decontaminator(items + benchmark_items(q.benchmarks, q.benchmark_files), q.ngram, threshold=None)
        self.max_words = cfg.hote.max_task_words

    def reason(self, task: str) -> str | None:
        if not task.strip():
            return "empty"
        if len(task.split()) > self.max_words:
            return f"longer than {self.max_words} words"
        match = self.guard.matches([task])[0]
        return None if match is None else f"shares a {self.guard.n}-gram with {match['benchmark']} query {match['item_id']}"


# ---------------------------------------------------------------- the driver

@dataclass
class HoteStep:
    step: int
    real: list[str]
    synthetic: list[str]
    modes: dict[str, str]
    rewards: dict[str, list[float | None]] = field(default_factory=dict)
    proposer_rewards: list[float | None] = field(default_factory=list)
    judge_calls: dict[str, int] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)
    meta_failed: list[int] = field(default_factory=list)  # proposer groups whose meta call failed: no proposing
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # solver step, proposer update, proposing, saving


def judge_sampling(cfg: Config) -> Config:
    """``cfg`` with HOTE's judge sampling (``hote.judge_*``, App. E) on the ``evolve.role`` role."""
    h, name = cfg.hote, cfg.evolve.role
    update = {k: v for k, v in (("temperature", h.judge_temperature), ("top_p", h.judge_top_p),
                                ("max_tokens", h.judge_max_tokens)) if v is not None}
    role = cfg.llm.role(name).model_copy(update=update)
    return cfg.model_copy(update={"llm": cfg.llm.model_copy(update={name: role})})


class HoteRun:
    """Algorithm 1 over a dataset, with a solver and a proposer policy and the fixed judge role."""

    def __init__(self, cfg: Config, dataset: str | Path, model: str, proposer_model: str | None = None):
        from rubricforge.llm import LLMClient

        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise UserError("train hote runs in one process (its rewards need whole groups, and it holds two trainers)",
                            "start it with python / rubricforge, not accelerate launch or torchrun")
        h = cfg.hote
        cfg = judge_sampling(cfg)
        self.cfg, self.model, self.proposer_model = cfg, model, proposer_model or h.proposer_model or model
        self.dir = Path(cfg.run_dir) / "hote"
        rows, self.gold = held_out(cfg, training_rows(dataset, ["hote"]), dataset)
        self.real = {str(r.get("id") or r["question"]): r for r in rows}
        self.pool = sorted(self.real)
        if len(self.real) < h.batch_size:
            raise UserError(f"dataset {dataset} has {len(self.real)} tasks, hote.batch_size is {h.batch_size}",
                            "lower hote.batch_size or train on a larger dataset")
        self.validity = TaskValidity(cfg, [(k, str(r["question"])) for k, r in self.real.items()])
        self.cost = hote_cost(cfg, rows, response_tokens(cfg, "hote"), self.visit_bounds())
        self.cost.check(cfg.llm.max_cost_usd)
        e = cfg.evolve
        self.bank = RubricBank(BankSettings(e.pos_weight, e.neg_weight, e.max_active, e.max_new, e.answer_words,
                                            e.dedup_cosine, e.role))
        self.client = LLMClient(cfg.llm)
        self.judge = Judge(self.client, e.role)
        self.step = 0
        self.proposer_updates = 0  # the proposer's GRPO steps so far (fewer than step - 1 after a step proposed nothing)
        self.synthetic: list[dict[str, Any]] = []  # tasks to solve next step: id, query, group, mode
        self.pending: list[dict[str, Any]] = []  # proposal groups of the last step: group, mode, meta ids, proposals
        self.generation: list[Any] | None = None  # the proposer's generation for ``pending`` (token ids)
        self.calls: Counter[str] = Counter()
        self.judgments: dict[str, dict[str, list[int | None]]] = {}  # task -> rubric -> J over the G responses
        self.weak: dict[str, list[Weakness]] = {}  # task -> its weaknesses this step (Eq. 4's A, compressed)
        self.rewards: dict[str, list[float | None]] = {}  # task -> Eq. 2 of its G responses
        self._embedder: Any = None
        self.solver_worker, self.proposer_worker = TrainerThread("solver"), TrainerThread("proposer")
        self.solver: Any = None
        self.proposer: Any = None
        self.toolbox: Any = None

    # -------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "proposer_updates": self.proposer_updates, "bank": self.bank.state_dict(),
                "synthetic": self.synthetic, "pending": self.pending, "generation": self.generation}

    def save(self) -> None:
        atomic_write_json(self.dir / STATE, self.state_dict())

    def load(self) -> bool:
        path = self.dir / STATE
        if not path.is_file():
            return False
        state = json.loads(path.read_text(encoding="utf-8"))
        self.step, self.synthetic, self.pending = int(state["step"]), state["synthetic"], state["pending"]
        self.generation = state["generation"]
        self.proposer_updates = int(state.get("proposer_updates", self.step - 1))  # a state saved before the count
        self.bank.load_state_dict(state["bank"])
        return True

    # -------------------------------------------------- trainers

    def _args(self, role: str, group: int, prompts: int, steps: int) -> Any:
        with needs("train"):
            from trl import GRPOConfig

        from rubricforge.training.grpo import grpo_args, paper_args, trl_config
        from rubricforge.training.presets import optimiser_steps_per_generation

        h = self.cfg.hote
        args = {**grpo_args(self.cfg, "hote", **paper_args(self.cfg, "hote")), **(h.proposer_grpo_args if role == "proposer" else {}),
                "num_generations": group, "generation_batch_size": prompts * group, "output_dir": str(self.dir / role),
                "ignore_data_skip": True, "save_strategy": "steps"}
        if h.updates_per_step is not None:  # n updates per step: the rows of each accumulated over its mini-batches
            rows, micro = prompts * group, int(args["per_device_train_batch_size"])
            if rows % (micro * h.updates_per_step):
                raise UserError(f"hote.updates_per_step = {h.updates_per_step} does not split the {role}'s {rows} "
                                f"rollouts into mini-batches of per_device_train_batch_size = {micro}",
                                f"choose a divisor of {rows // micro}")
            args["gradient_accumulation_steps"] = rows // (micro * h.updates_per_step)
        probe = trl_config(GRPOConfig, {**args, "max_steps": 1})
        per_step = optimiser_steps_per_generation(probe)  # optimiser steps per HOTE step
        # one step more than the run needs: the driver ends both trainers (a trainer whose train() returned on its
        # own left the other one's later steps slower on CPU)
        return trl_config(GRPOConfig, {**args, "max_steps": (steps + 1) * per_step, "save_steps": per_step})

    def build(self) -> None:
        """Both trainers (called by :meth:`train` unless done before)."""
        with needs("train"):
            from datasets import Dataset

        from rubricforge.agent.environment import NoToolEnvironment, environment_factory
        from rubricforge.corpora.tools import ToolBox
        from rubricforge.training.model import greedy_reply, load_tokenizer

        h = self.cfg.hote
        self.toolbox = ToolBox.from_config(self.cfg) if self.cfg.hote.modes != "no_tool" else None
        envs: dict[str, Any] = {NO_TOOL: NoToolEnvironment}
        if self.toolbox is not None:
            envs[TOOL] = environment_factory(self.toolbox)
        slots = [{"prompt": [{"role": "user", "content": ""}], "environment": NO_TOOL, "task_id": "", "question": ""}]
        tokenizer = load_tokenizer(self.model, self.cfg.train.chat_template)
        self.solver = stepped_trainer(
            self.solver_worker, model=self.model, reward_funcs=[self._solver_reward],
            args=self._args("solver", h.group, h.batch_size, h.steps),
            train_dataset=Dataset.from_list(slots * h.batch_size), processing_class=tokenizer, environment_factory=envs)
        if self.gold:  # the solver is the policy under test
            self.solver.add_callback(gold_callback(self.cfg, self.gold, partial(greedy_reply, tokenizer=tokenizer),
                                                   "hote"))
        self.proposer = stepped_trainer(
            self.proposer_worker, model=self.proposer_model, reward_funcs=[self._proposer_reward],
            args=self._args("proposer", h.proposer_group, h.combinations, h.steps),
            train_dataset=Dataset.from_list(slots * h.combinations),
            processing_class=load_tokenizer(self.proposer_model, self.cfg.train.chat_template), environment_factory=envs)

    def _checkpoint(self, role: str, updates: int) -> str | None:
        if updates <= 0:
            return None
        trainer = self.solver if role == "solver" else self.proposer
        path = self.dir / role / f"checkpoint-{updates * trainer.args.save_steps}"
        if not path.is_dir():
            raise UserError(f"{self.dir / STATE} is at step {self.step} but {path} is missing",
                            f"remove {self.dir} to start over")
        return str(path)

    def _on_loop(self, coro: Any) -> Any:
        """Run ``coro`` on the solver trainer's event loop, where the LLM client lives."""
        return asyncio.run_coroutine_threadsafe(coro, self.solver.async_loop).result()

    # -------------------------------------------------- rewards (called by the trainers)

    async def _solver_reward(self, prompts: list[Any], completions: list[Any], task_id: list[str],
                             **kwargs: Any) -> list[float | None]:
        """Eq. 3 update per task from its G responses, Eq. 2 per response over persistent ∪ active, the weaknesses
        (Eq. 4's assessment), then DR Tulu's pruning if ``hote.retire=spread``."""
        answers = [parse_trajectory(c).answer for c in completions]
        groups: dict[str, list[int]] = {}
        for i, tid in enumerate(task_id):
            groups.setdefault(tid, []).append(i)
        shown = {t: [answers[i] or "(no final answer)" for i in idx] for t, idx in groups.items()}
        embed = self._embed if self.cfg.evolve.dedup_cosine < 1 else None
        results = await self.bank.update(self.client, shown, self.step, embed)
        self.calls["update"] += len(results)
        before = self.judge.calls["hote"]
        scores = await asyncio.gather(*(hote_reward(self.judge, self.bank.tasks[t].query, answers[i],
                                                    [r.criterion() for r in self.bank.tasks[t].scored()])
                                        for i, t in enumerate(task_id)))
        self.calls["rubric"] += self.judge.calls["hote"] - before
        for tid, idx in groups.items():
            tr = self.bank.tasks[tid]
            self.judgments[tid] = {r.id: [scores[i].per_rubric.get(r.id) for i in idx] for r in tr.scored()}
            self.rewards[tid] = [scores[i].value for i in idx]
            # Eq. 4 reads the assessment of the rubrics the responses were scored with, before any pruning: a
            # rubric that every response failed (zero spread) is exactly the weakness the proposer should see
            self.weak[tid] = weaknesses(tr, self.judgments[tid], shown[tid])
            if self.cfg.hote.retire == "spread":
                prune(tr, self.judgments[tid], self.bank.settings.max_active)
        if callable(log_metric := kwargs.get("log_metric")):
            log_metric("evolve/new_positive", float(sum(len(r.positive) for r in results.values())))
            log_metric("evolve/new_negative", float(sum(len(r.negative) for r in results.values())))
            log_metric("evolve/update_failed", float(sum(r.failed for r in results.values())))
        return [s.value for s in scores]

    def _embed(self, texts: list[str]) -> Any:
        if self._embedder is None:
            from rubricforge.corpora.embedding import Embedder

            self._embedder = Embedder.from_config(self.cfg.embedding)
        return self._embedder.embed_passages(texts)

    def _proposer_reward(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        """Hand the proposals to the driver and wait for their Eq. 5 rewards (known after the next solver step)."""
        return self.proposer_worker.request("proposals", [parse_trajectory(c).answer or "" for c in completions])

    # -------------------------------------------------- one step

    def _rows(self, tasks: list[tuple[str, str]], modes: dict[str, str], group: int) -> list[dict[str, Any]]:
        rows = []
        for tid, query in tasks:
            if modes[tid] != TOOL:
                prompt = no_tool_prompt(query)
            else:
                prompt = self.real[tid]["prompt"] if tid in self.real else agent_prompt(query)
            rows += [{"prompt": prompt, "environment": modes[tid], "task_id": tid, "question": query}] * group
        return rows

    def _draw(self, t: int, k: int) -> list[str]:
        """The k real tasks of step t (seeded by the step, so a resumed run draws the same)."""
        return random.Random(f"{self.cfg.hote.seed}:real:{t}").sample(self.pool, k)

    def visit_bounds(self) -> list[int]:
        """Per step t, the most steps ≤ t that can have drawn any one real task: each step draws B − s real tasks,
        s (its synthetic tasks) 0 at step 1, else anywhere in 0..B/2; the judge-cost bound's input."""
        h, seen, out = self.cfg.hote, Counter[str](), []
        for t in range(1, h.steps + 1):
            sizes = [h.batch_size] if t == 1 else range(h.batch_size - h.batch_size // 2, h.batch_size + 1)
            seen.update({tid for k in sizes for tid in self._draw(t, k)})
            out.append(max(seen.values()))
        return out

    def batch(self, t: int) -> tuple[list[tuple[str, str]], dict[str, str], list[str]]:
        """Step t's tasks (id, query), their modes, and the real ids (the synthetic tasks come first)."""
        h, e = self.cfg.hote, self.cfg.evolve
        synthetic = [(s["id"], s["query"]) for s in self.synthetic]
        real_ids = self._draw(t, h.batch_size - len(synthetic))
        modes = step_modes(real_ids, t, self.cfg.hote.modes, e.no_tool_steps, e.tool_share, e.seed)
        modes.update({s["id"]: s["mode"] for s in self.synthetic})
        for tid in real_ids:
            row = self.real[tid]
            self.bank.task(tid, str(row["question"]), criteria_from(row["rubrics"], where=f"example {tid!r} rubrics"))
        return synthetic + [(tid, str(self.real[tid]["question"])) for tid in real_ids], modes, real_ids

    def _pending_rewards(self) -> list[float | None]:
        """Eq. 5 for every pending proposal, in the proposer's row order (invalid: 0)."""
        out: list[float | None] = []
        for g in self.pending:
            for p in g["proposals"]:
                if p["task_id"] is None:
                    out.append(0.0)
                else:
                    judged = self.judgments.get(p["task_id"], {})
                    out.append(proposer_reward({m: judged.get(m, [None]) for m in g["meta_ids"]}))
        return out

    def _propose(self, t: int, tasks: list[tuple[str, str]],
                 record: HoteStep) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """N combinations of S, their meta rubrics (Eq. 4), the proposer's rows (G′ per combination). The
        proposer's batch is fixed (N × G′ rows): when a meta call failed, no rows (the step proposes nothing)."""
        h, e = self.cfg.hote, self.cfg.evolve
        combos = combinations([tid for tid, _ in tasks], h.combinations, h.combo_size, f"{h.seed}:combo:{t}")
        queries = dict(tasks)

        async def all_meta():
            return await asyncio.gather(*(meta_rubrics(
                self.client, [(queries[tid], self.weak.get(tid, [])) for tid in combo], t, n, e.role)
                for n, combo in enumerate(combos, 1)))

        metas = self._on_loop(all_meta())
        self.calls["meta"] += len(combos)
        kept = [meta for meta in metas if meta is not None]
        record.meta_failed = [n for n, meta in enumerate(metas, 1) if meta is None]
        if record.meta_failed:
            log.warning("step %d: the meta rubrics of proposer group(s) %s failed; the proposer's batch is fixed "
                        "(%d groups), so it proposes nothing this step", t, record.meta_failed, len(combos))
            return [], []
        group_modes = step_modes([str(n) for n in range(1, len(combos) + 1)], t + 1, self.cfg.hote.modes,
                                 e.no_tool_steps, e.tool_share, e.seed)
        groups, rows = [], []
        for n, (combo, meta) in enumerate(zip(combos, kept, strict=True), 1):
            mode = group_modes[str(n)]
            prompt = proposer_messages([queries[c] for c in combo], meta, mode == TOOL)
            groups.append({"group": n, "mode": mode, "combo": list(combo), "prompt": prompt,
                           "meta": [m.model_dump(mode="json") for m in meta], "meta_ids": [m.id for m in meta]})
            rows += [{"prompt": prompt, "environment": mode, "task_id": f"proposer-{t}-{n}", "question": ""}] * h.proposer_group
        return groups, rows

    def _accept(self, t: int, groups: list[dict[str, Any]], texts: list[str], record: HoteStep) -> None:
        """Validity per proposal; the valid ones become next step's synthetic tasks (persistent = meta rubrics)."""
        g_size = self.cfg.hote.proposer_group
        self.synthetic = []
        for k, g in enumerate(groups):
            g["proposals"] = []
            meta = [RubricItem.model_validate(m) for m in g["meta"]]
            for i, text in enumerate(texts[k * g_size:(k + 1) * g_size], 1):
                reason = self.validity.reason(text)
                if reason:
                    g["proposals"].append({"text": text, "task_id": None, "invalid": reason})
                    record.invalid.append(reason)
                    continue
                tid = f"syn{t}-{g['group']}-{i}"
                g["proposals"].append({"text": text, "task_id": tid, "invalid": None})
                self.bank.tasks[tid] = TaskRubrics(task_id=tid, query=text.strip(), persistent=[m.model_copy() for m in meta])
                self.synthetic.append({"id": tid, "query": text.strip(), "group": g["group"], "mode": g["mode"]})
        self.pending = groups

    def run_step(self, t: int) -> HoteStep:
        started, calls_before = time.perf_counter(), Counter(self.calls)
        clock = started

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            record.phases[name], clock = now - clock, now

        self.step = t
        tasks, modes, real_ids = self.batch(t)
        record = HoteStep(t, real_ids, [s["id"] for s in self.synthetic], modes)
        self.judgments, self.weak, self.rewards = {}, {}, {}
        self.solver_worker.send({"rows": self._rows(tasks, modes, self.cfg.hote.group)})
        self.solver_worker.wait("ready")
        record.rewards = dict(self.rewards)
        lap("solver")
        if self.pending:  # the proposer's step on last step's proposals (Eq. 5 from this step's J)
            record.proposer_rewards = self._pending_rewards()
            self.proposer_worker.send(record.proposer_rewards)
            self.proposer_worker.wait("ready")
            self.proposer_updates += 1
        lap("proposer_update")
        groups, rows = self._propose(t, tasks, record)
        for tid in record.synthetic:  # solved and rewarded: its rubrics are no longer needed
            del self.bank.tasks[tid]
        self.generation = None
        if rows:
            self.proposer_worker.send({"rows": rows})
            _, texts = self.proposer_worker.wait("proposals")
            self.generation = jsonable_generation(self.proposer.last_generation)
            self._accept(t, groups, texts, record)
        else:
            self.synthetic, self.pending = [], []
        lap("propose")
        record.judge_calls = dict(self.calls - calls_before)
        self.save()
        lap("save")
        record.seconds = time.perf_counter() - started
        with (self.dir / STEPS).open("a", encoding="utf-8") as f:  # after the state: a resumed step is logged once
            f.write(json.dumps(record.__dict__) + "\n")
        return record

    # -------------------------------------------------- the loop

    def train(self, on_step: Callable[[HoteStep], None] | None = None) -> list[HoteStep]:
        """Steps ``step+1 .. hote.steps`` (resuming from the run directory when it has a state), then save both
        policies to ``<run_dir>/hote/{solver,proposer}/final``."""
        resumed = self.load()
        if self.solver is None:
            self.build()
        records: list[HoteStep] = []
        solver_from, proposer_from = self._checkpoint("solver", self.step), self._checkpoint("proposer", self.proposer_updates)
        try:
            self.solver_worker.start(lambda: self.solver.train(resume_from_checkpoint=solver_from))
            self.solver_worker.wait("ready")
            self.proposer_worker.start(lambda: self.proposer.train(resume_from_checkpoint=proposer_from))
            self.proposer_worker.wait("ready")
            if resumed and self.pending:  # the held proposer step: its generation, waiting for its rewards
                rows = [{"prompt": g["prompt"], "environment": g["mode"], "task_id": f"proposer-{self.step}-{g['group']}",
                         "question": ""} for g in self.pending for _ in range(self.cfg.hote.proposer_group)]
                self.proposer_worker.send({"rows": rows, "stash": self.generation})
                self.proposer_worker.wait("proposals")
            for t in range(self.step + 1, self.cfg.hote.steps + 1):
                record = self.run_step(t)
                records.append(record)
                if on_step is not None:
                    on_step(record)
        finally:
            self.proposer_worker.stop()
            self.solver_worker.stop()
            self.close()
        for role, trainer in (("solver", self.solver), ("proposer", self.proposer)):
            trainer.save_model(str(self.dir / role / "final"))
        return records

    def close(self) -> None:
        loop = getattr(self.solver, "async_loop", None)
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(self.client.aclose(), loop).result()
        if self.toolbox is not None:
            self.toolbox.close()


def step_summary(record: HoteStep) -> str:
    """One line per step for the console."""
    scored = [v for vs in record.rewards.values() for v in vs if v is not None]
    prop = [v for v in record.proposer_rewards if v is not None]
    return (f"step {record.step}: {len(record.real)} real + {len(record.synthetic)} synthetic tasks; "
            f"solver reward {statistics.fmean(scored) if scored else float('nan'):.3f}; "
            f"proposer reward {statistics.fmean(prop) if prop else float('nan'):.3f}; "
            f"judge calls {sum(record.judge_calls.values())} {dict(record.judge_calls)}; "
            f"{len(record.invalid)} invalid proposals; {record.seconds:.1f} s")
