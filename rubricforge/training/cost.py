"""What the judge will cost a training run, printed before its first step and checked against ``llm.max_cost_usd``.

From the dataset's rubric counts, the trainer's batch (prompts per step, rollouts per prompt, steps) and the
reward: judge calls per step, their tokens and, for a model in litellm's price table, dollars, per step and for
the run. It is an upper bound: every response is counted at ``max_completion_length`` tokens and every judge
answer at the role's ``max_tokens``; the prompt is the judge's system prompt, the question and the rubric text
(characters / 4). Rewards without a judge (format, search, PRM, the lexical Report-RL checks) cost no call; the
composite's citation checks (a call per cited statement) are not counted, which the line says.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.llm.pricing import CHARS_PER_TOKEN, price, template_tokens

# judge calls per rollout of each reward, and the judge prompt they use (None: no judge)
_PER_CRITERION = {"rubric": "rubric_score", "composite": "rubric_score", "hote": "hote_judge", "pref_rubric": "pref_item_score"}
_PER_ROLLOUT = {"race": "race_score", "report": "race_score", "orm": "orm_judge", "search_rl": "orm_judge"}


@dataclass
class JudgeCost:
    """Per step: calls and tokens; ``price`` = (USD per input token, per output token), None when unpriced."""

    model: str
    steps: int
    calls: float
    prompt_tokens: float
    completion_tokens: float
    price: tuple[float, float] | None
    note: str = ""

    @property
    def usd_per_step(self) -> float | None:
        if self.price is None:
            return None
        return self.prompt_tokens * self.price[0] + self.completion_tokens * self.price[1]

    @property
    def usd(self) -> float | None:
        per = self.usd_per_step
        return None if per is None else per * self.steps

    def line(self) -> str:
        tokens = self.prompt_tokens + self.completion_tokens
        dollars = (f", ${self.usd_per_step:.2f} per step, ${self.usd:.2f} for the run" if self.usd is not None
                   else " (no price known for this model)")
        return (f"judge {self.model}: at most {self.calls:,.0f} calls and {tokens:,.0f} tokens per step, "
                f"{self.calls * self.steps:,.0f} calls and {tokens * self.steps:,.0f} tokens over {self.steps} steps"
                f"{dollars}{'; ' + self.note if self.note else ''}")

    def check(self, cap: float | None) -> None:
        """A one-line :class:`UserError` when the run's bound exceeds ``cap`` (``llm.max_cost_usd``)."""
        if cap is not None and self.usd is not None and self.usd > cap:
            raise UserError(f"the judge may cost up to ${self.usd:.2f} over {self.steps} steps "
                            f"(${self.usd_per_step:.2f} per step), more than llm.max_cost_usd = ${cap:.2f}",
                            "raise llm.max_cost_usd, or train fewer steps, shorter responses or smaller batches")


def _rubric_chars(row: Mapping[str, Any]) -> list[int]:
    return [len(str(c.get("title") or "")) + len(str(c.get("description") or "")) if isinstance(c, Mapping)
            else len(str(c)) for c in row.get("rubrics") or []]


def grpo_cost(cfg: Config, rows: Sequence[Mapping[str, Any]], prompts_per_step: int, group: int, steps: int,
              response_tokens: int) -> JudgeCost:
    """``train grpo``'s judge per step (``train.reward``, an evolving bank's updates and active rubrics)."""
    from rubricforge.rewards.judging import PROMPTS

    role, reward, e = cfg.llm.judge, cfg.train.reward, cfg.evolve
    question = statistics.fmean(len(str(r.get("question") or "")) for r in rows) / CHARS_PER_TOKEN
    rubrics = [_rubric_chars(r) for r in rows]
    n_rubrics = statistics.fmean(len(r) for r in rubrics)
    rubric_tokens = statistics.fmean(sum(r) / max(len(r), 1) for r in rubrics) / CHARS_PER_TOKEN
    rollouts = prompts_per_step * group
    calls = prompt = 0.0
    if reward in _PER_CRITERION:
        batched = reward in ("rubric", "composite") and cfg.reward.judge_mode == "batched"
        per = (1.0 if batched else n_rubrics + (e.max_active if e.rubrics == "evolving" else 0))
        template = template_tokens(PROMPTS, "rubric_score_batched" if batched else _PER_CRITERION[reward])
        calls = rollouts * per
        prompt = calls * (template + question + response_tokens) + rollouts * n_rubrics * rubric_tokens
    elif reward in _PER_ROLLOUT:
        votes = (len(cfg.reward.orm_roles) or cfg.reward.orm_votes) if _PER_ROLLOUT[reward] == "orm_judge" else 1
        calls = rollouts * votes
        prompt = calls * (template_tokens(PROMPTS, _PER_ROLLOUT[reward]) + question + response_tokens * (
            2 if reward in ("race", "report") else 1))  # RACE compares the report with a reference
    if e.rubrics == "evolving":  # one bank update per prompt, its G responses cut to evolve.answer_words
        calls += prompts_per_step
        prompt += prompts_per_step * (question + n_rubrics * rubric_tokens
                                      + group * min(response_tokens, e.answer_words * 4 // 3))
    note = "citation checks not counted" if reward in ("composite", "citation") else ""
    return JudgeCost(role.model, steps, calls, prompt, calls * role.max_tokens, price(role), note)


def hote_cost(cfg: Config, rows: Sequence[Mapping[str, Any]], response_tokens: int, visits: Sequence[int]) -> JudgeCost:
    """``train hote``'s fixed judge, an upper bound on the calls: per step B rubric updates, N meta-rubric calls and
    B × G × |R| binary judgments, |R| = the most persistent rubrics of a task (5 for a synthetic task's meta
    rubrics, the prompt's most) plus its active ones. With ``hote.retire=judge`` nothing caps those: a task
    updated v times carries at most v × ``evolve.max_new``, and ``visits[t - 1]`` is the most times any real task
    can have been drawn by step t (:meth:`~rubricforge.training.hote.HoteRun.visit_bounds`); with ``spread`` at
    most ``evolve.max_active`` + ``max_new``. The per-step figures are the mean of the per-step bounds."""
    from rubricforge.rewards.judging import PROMPTS

    h, e = cfg.hote, cfg.evolve
    role = cfg.llm.role(e.role)
    question = statistics.fmean(len(str(r.get("question") or "")) for r in rows) / CHARS_PER_TOKEN
    persistent = max(5, *(len(_rubric_chars(r)) for r in rows))
    cap = e.max_active + e.max_new if h.retire == "spread" else None
    active = [min(e.max_new * v, cap) if cap is not None else e.max_new * v for v in visits]
    judged = h.batch_size * h.group * (persistent + statistics.fmean(active))
    shown = min(response_tokens, e.answer_words * 4 // 3)
    prompt = (judged * (template_tokens(PROMPTS, "hote_judge") + question + response_tokens)
              + h.batch_size * (question + h.group * shown) + h.combinations * h.combo_size * (question + 200))
    calls = judged + h.batch_size + h.combinations
    note = (f"up to {persistent + active[-1]} rubrics per task by step {len(active)} (active rubrics accumulate); "
            "per step: the mean of the steps' bounds")
    return JudgeCost(role.model, h.steps, calls, prompt, calls * role.max_tokens, price(role), note)


def score_cost(cfg: Config, rows: Sequence[Mapping[str, Any]], prompts_per_step: int, group: int, steps: int,
               response_tokens: int) -> JudgeCost:
    """``train score``'s evaluator per step: one assessment per query of its K reports, up to
    ``score.max_search_turns`` calls each (every turn re-reads the reports; none with ``score.assessor=policy``),
    plus the harness every M steps."""
    from rubricforge.rewards.judging import PROMPTS

    s = cfg.score
    role = cfg.llm.role(s.evaluator_role if s.assessor == "role" else s.harness_role)
    question = statistics.fmean(len(str(r.get("question") or "")) for r in rows) / CHARS_PER_TOKEN
    reports = group * min(response_tokens, s.report_words * 4 // 3)
    turns = prompts_per_step * s.max_search_turns if s.assessor == "role" else 0  # the policy assesses for free
    calls = turns + 1 / s.harness_every
    prompt = turns * (template_tokens(PROMPTS, "score_assess") + question + reports)
    note = "" if s.assessor == "role" else "the policy assesses the reports; only the harness calls count"
    return JudgeCost(role.model, steps, calls, prompt, calls * role.max_tokens, price(role), note)
