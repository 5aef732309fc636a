"""A gold judge during training (``train.gold_judge``): every ``train.gold_every`` optimiser steps the policy answers
held-out tasks and a judge that is *not* the training judge scores the answers, so a user sees whether the training
reward still means what it should (the Rubric Dropout study saw a training judge's reward rise while a held-out
gold judge's score fell).

* **Gold judge**: ``train.gold_judge`` is a YAML config file (its ``llm`` section; the ``judge`` role judges) or a
  model name (the run's ``llm.judge`` with that model: an embedded model name runs locally, anything else through
  litellm). One with the backend, model and endpoint of a judging role of the training run (``judge``,
  ``evolve.role``, ``score.evaluator_role``, ``reward.orm_roles``) is refused.
* **Held-out tasks**: ``train.gold_tasks`` (any dataset ``eval`` reads), else the dataset's rows whose ``split`` is
  ``test`` or ``validation`` — those rows are then left out of training.
* **Evaluation**: at each logged step that is a multiple of ``train.gold_every``, the policy answers every held-out
  question greedily without tools (the no-tool prompt, at most ``max_completion_length`` tokens, the trainer's own
  weights), and each answer is scored by the task's automatic scorer of ``rubricforge eval``
  (:func:`rubricforge.evaluation.scorers.score`: exact answer, RACE or the rubric judge; its headline metric). The
  gold score is the mean over the scored tasks (unscored ones are counted, never 0).
* **Curves**: the step's log entry (``trainer.state.log_history``) gets ``gold/score``, ``gold/unscored`` and
  ``gold/train_reward`` — the mean training ``reward`` logged since the previous evaluation — and the same goes,
  one line per evaluation, to ``<output_dir>/gold.jsonl``.
* **Warning** (:func:`diverging`): over the last :data:`WINDOW` evaluations, the training reward rose by more than
  :data:`MIN_DELTA` while the gold score fell by more than :data:`MIN_DELTA` (each last value against the first of
  the window): one warning line, and ``"warning"`` in the JSONL line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rubricforge.config import Config, LLMConfig, RoleConfig, load_config
from rubricforge.errors import UserError
from rubricforge.extras import needs

log = logging.getLogger(__name__)
WINDOW = 3  # evaluations the warning looks back over (2 × gold_every steps)
MIN_DELTA = 0.02  # a rise / fall smaller than this (on [0, 1]) is noise
HELD_OUT = ("test", "validation")
LOG = "gold.jsonl"


def diverging(train: Sequence[float | None], gold: Sequence[float | None], window: int = WINDOW,
              min_delta: float = MIN_DELTA) -> bool:
    """Whether the training reward rose while the gold score fell over the last ``window`` evaluations (see the
    module docstring); False with fewer evaluations or an unscored one among them."""
    t, g = list(train)[-window:], list(gold)[-window:]
    if len(t) < window or len(g) < window or any(v is None for v in (*t, *g)):
        return False
    return t[-1] - t[0] > min_delta and g[0] - g[-1] > min_delta  # type: ignore[operator]


def _identity(role: RoleConfig) -> tuple[str, str, str]:
    return role.backend, role.model, role.api_base or ""


def gold_llm(cfg: Config) -> LLMConfig:
    """The gold judge's LLM settings (its ``judge`` role judges); a UserError when it is a training judge."""
    from rubricforge.llm.local_model import MODELS

    value = str(cfg.train.gold_judge)
    path = Path(value)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        llm = load_config(path).llm
    else:
        backend = "local" if value in MODELS else "litellm"
        llm = cfg.llm.model_copy(update={"judge": cfg.llm.judge.model_copy(update={
            "model": value, "backend": backend, "api_base": None, "api_key_env": None})})
    gold = _identity(llm.judge)
    for role in dict.fromkeys(["judge", cfg.evolve.role, cfg.score.evaluator_role, *cfg.reward.orm_roles]):
        if _identity(cfg.llm.role(role)) == gold:
            raise UserError(f"train.gold_judge {value!r} is the training judge (llm.{role}: {gold[1]} via {gold[0]}"
                            f"{' at ' + gold[2] if gold[2] else ''})",
                            "give --gold-judge another model, or a config whose llm.judge is another model or endpoint")
    return llm


def held_out(cfg: Config, rows: list[dict[str, Any]], dataset: str | Path) -> tuple[list[dict[str, Any]],
                                                                                     list[dict[str, Any]]]:
    """(training rows, held-out rows) when the gold judge is on (see the module docstring); else (rows, [])."""
    t = cfg.train
    if not t.gold_judge:
        return rows, []
    gold_llm(cfg)  # a training judge is refused before anything loads
    if t.gold_tasks:
        from rubricforge.evaluation.tasks import load_tasks

        return rows, list(load_tasks(t.gold_tasks).values())
    held = [r for r in rows if r.get("split") in HELD_OUT]
    train = [r for r in rows if r.get("split") not in HELD_OUT]
    if not held:
        raise UserError(f"dataset {dataset} has no held-out rows (no row with split test or validation) for the "
                        "gold judge", "set train.gold_tasks to a held-out task set, or mark rows with a split column")
    if not train:
        raise UserError(f"dataset {dataset}: every row is held out (split test / validation), none is left to train on",
                        "set train.gold_tasks to a held-out task set instead")
    return train, held


async def gold_scores(llm: LLMConfig, tasks: Sequence[dict[str, Any]], reports: Sequence[str],
                      judge_mode: str) -> list[float | None]:
    """Each report's headline metric under its task's automatic scorer, by the gold judge (None: unscored)."""
    from rubricforge.evaluation.scorers import score
    from rubricforge.evaluation.tasks import scorers_for
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.judging import Judge

    client = LLMClient(llm)
    judge = Judge(client)

    async def one(task: dict[str, Any], report: str) -> float | None:
        name = scorers_for(task, None)[0]
        got = await score(name, judge, task, report, task.get("reference_report") or None, judge_mode)  # type: ignore[arg-type]
        return next(iter(got["metrics"].values()))

    try:
        return list(await asyncio.gather(*(one(t, r) for t, r in zip(tasks, reports, strict=True))))
    finally:
        await client.aclose()


def gold_callback(cfg: Config, tasks: list[dict[str, Any]], reply: Callable[[Any, list[dict[str, Any]], int], str]) -> Any:
    """The TRL / transformers callback that runs the gold evaluations (see the module docstring); ``reply(model,
    messages, max_new_tokens)`` is the policy's greedy answer (the trainer's generation, so evaluation imports no
    training code)."""
    with needs("train"):
        from transformers import TrainerCallback

    from rubricforge.agent.prompt import no_tool_prompt
    from rubricforge.evaluation.tasks import report_text, scorers_for

    llm, every = gold_llm(cfg), cfg.train.gold_every
    for task in tasks:
        scorers_for(task, None)  # a task nothing can score fails now, not at step N
    judge_model = llm.judge.model

    class GoldJudge(TrainerCallback):
        def on_log(self, args, state, control, model=None, logs=None, **kw):  # after the step's reward is logged
            step = state.global_step
            if not logs or "reward" not in logs or step % every or "gold/score" in state.log_history[-1]:
                return
            tokens = getattr(args, "max_completion_length", None) or cfg.train.max_new_tokens
            reports = [report_text(reply(model, no_tool_prompt(str(t.get("question") or "")), tokens))
                       for t in tasks]
            scores = asyncio.run(gold_scores(llm, tasks, reports, cfg.reward.judge_mode))
            scored = [s for s in scores if s is not None]
            before = max((h["step"] for h in state.log_history if "gold/score" in h), default=0)
            rewards = [h["reward"] for h in state.log_history if "reward" in h and before < h.get("step", 0) <= step]
            entry = {"gold/score": statistics.fmean(scored) if scored else None,
                     "gold/unscored": float(len(scores) - len(scored)),
                     "gold/train_reward": statistics.fmean(rewards) if rewards else None}
            state.log_history[-1].update(entry)
            series = [h for h in state.log_history if "gold/score" in h]
            record: dict[str, Any] = {"step": step, "train_reward": entry["gold/train_reward"],
                                      "gold": entry["gold/score"], "tasks": len(tasks),
                                      "unscored": len(scores) - len(scored), "judge": judge_model}
            if diverging([h["gold/train_reward"] for h in series], [h["gold/score"] for h in series]):
                record["warning"] = (f"training reward rose while the held-out gold score fell over the last {WINDOW} "
                                     f"gold evaluations (steps {series[-WINDOW]['step']}-{step}): the policy may be "
                                     f"exploiting the training judge")
                log.warning("step %d: %s", step, record["warning"])
            out = Path(args.output_dir) / LOG
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")

    return GoldJudge()
