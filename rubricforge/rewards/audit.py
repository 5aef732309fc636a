"""`rubricforge judge agreement`: how far to trust a rubric judge.

Every criterion of every response is scored (Figure 5, 0–4) ``repeats`` times by the judge role, each
repeat an independent sample (seed + k; repeat 0 is the ordinary scoring request), once by a second
judge role, and once in the batched mode. Reported:

* **repeat variance**: per criterion, the population variance of its repeated scores on the 0–4 scale;
  the mean over criteria and the share of criteria whose repeats disagree;
* **agreement** (judge vs second judge; per-criterion vs batched mode): over criteria both scored, exact
  agreement, quadratic-weighted Cohen's κ and Spearman's ρ (None when undefined, e.g. constant scores),
  plus Spearman's ρ of the rubric rewards per response.

Responses without a final answer are skipped (nothing to judge). Unscored judge calls are counted. The job
that runs it, resumably: :mod:`rubricforge.jobs.reward_audit`.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rubricforge.extras import needs
from rubricforge.rewards.responses import Response
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.deeprubric.rubric_reward import MAX_SCORE, RubricScore, criteria_from, rubric_reward
from rubricforge.rewards.trajectory import parse_trajectory
from rubricforge.text import fmt


@dataclass
class AuditReport:
    judge: str
    second_judge: str
    repeats: int
    responses: int
    skipped_no_answer: int
    criteria: int
    variance: dict[str, Any] = field(default_factory=dict)
    agreement: dict[str, dict[str, Any]] = field(default_factory=dict)
    unscored: dict[str, int] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per (response, criterion)
    status: str = "complete"  # or "stopped: <why>" (a budget stop: the report covers the responses judged)
    out: str = ""  # where the full report (JSON) went

    def lines(self) -> list[str]:
        v, pair = self.variance, self.agreement["judge_vs_second_judge"]
        return [f"{self.status}: judge {self.judge} vs {self.second_judge}: {self.responses} responses "
                f"({self.skipped_no_answer} without an answer), {self.criteria} criteria, {self.repeats} repeats",
                f"repeat variance (0–4 scale): mean {fmt(v['mean'])}, max {fmt(v['max'])}, criteria with "
                f"disagreeing repeats {fmt(v['disagreeing_share'])}",
                f"rubric reward spearman (judge vs second judge): {fmt(pair['reward_spearman'])}; unscored calls "
                f"{self.unscored}", f"report: {self.out}"]


def summarise_agreement(judge: str, second_judge: str, repeats: int, results: Sequence[dict[str, Any]],
              unscored: dict[str, int]) -> AuditReport:
    """The report from each response's :func:`audit_response` record (``rows`` None: no answer, skipped)."""
    done = [r for r in results if r["rows"] is not None]
    rows = [row for r in done for row in r["rows"]]
    rewards = [r["rewards"] for r in done]
    report = AuditReport(judge, second_judge, repeats, len(results), len(results) - len(done), len(rows))
    report.rows = rows
    report.variance = _variance(rows)
    report.agreement = {
        "judge_vs_second_judge": _agreement([r["repeats"][0] for r in rows], [r["second"] for r in rows]),
        "per_criterion_vs_batched": _agreement([r["repeats"][0] for r in rows], [r["batched"] for r in rows])}
    report.agreement["judge_vs_second_judge"]["reward_spearman"] = _spearman(*_pairs(
        [x[0] for x in rewards], [x[1] for x in rewards]))
    report.unscored = unscored
    return report


async def audit_response(a: Judge, b: Judge, example: dict[str, Any], response: Response, repeats: int,
                         base: int) -> dict[str, Any]:
    """One response's record: ``rows`` (one per criterion: the judge's repeats, the second judge's and the
    batched score, 0–4) and ``rewards`` (the rubric reward by the judge and the second judge); ``rows`` None
    when the response has no final answer."""
    answer = parse_trajectory(response.completion).answer
    if not answer or not answer.strip():
        return {"rows": None}
    criteria = criteria_from(example.get("rubrics") or [], where=f"example {response.example_id!r} rubrics")
    question = str(example.get("question", ""))
    runs: list[RubricScore] = await asyncio.gather(
        *(rubric_reward(a, question, answer, criteria, seed=None if k == 0 else base + k) for k in range(repeats)),
        rubric_reward(b, question, answer, criteria),
        rubric_reward(a, question, answer, criteria, mode="batched"))
    *reps, second, batched = runs
    rows = [{"response": response.key, "criterion": c.id,
             "repeats": [_scale(r.per_criterion[c.id]) for r in reps],
             "second": _scale(second.per_criterion[c.id]), "batched": _scale(batched.per_criterion[c.id])}
            for c in criteria]
    return {"rows": rows, "rewards": [reps[0].value, second.value]}


def _scale(s: float | None) -> int | None:
    """Back to the judge's 0–4 integer scale."""
    return None if s is None else round(s * MAX_SCORE)


def _variance(rows: list[dict[str, Any]]) -> dict[str, Any]:
    variances = []
    for row in rows:
        scored = [s for s in row["repeats"] if s is not None]
        if len(scored) >= 2:
            row["variance"] = statistics.pvariance(scored)
            variances.append(row["variance"])
    return {"criteria": len(variances), "mean": statistics.fmean(variances) if variances else None,
            "max": max(variances, default=None),
            "disagreeing_share": (sum(v > 0 for v in variances) / len(variances)) if variances else None}


_T = TypeVar("_T")


def _pairs(xs: Sequence[_T | None], ys: Sequence[_T | None]) -> tuple[list[_T], list[_T]]:
    kept = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def _agreement(xs: list[int | None], ys: list[int | None]) -> dict[str, Any]:
    a, b = _pairs(xs, ys)
    if not a:
        return {"pairs": 0, "exact": None, "kappa_quadratic": None, "spearman": None}
    return {"pairs": len(a), "exact": sum(x == y for x, y in zip(a, b, strict=True)) / len(a),
            "kappa_quadratic": _kappa(a, b), "spearman": _spearman(a, b)}


def _kappa(xs: list[int], ys: list[int]) -> float | None:
    with needs("audit"):
        from sklearn.metrics import cohen_kappa_score

    if len(set(xs) | set(ys)) < 2:
        return None
    value = float(cohen_kappa_score(xs, ys, labels=list(range(MAX_SCORE + 1)), weights="quadratic"))
    return None if value != value else value  # NaN when a rater is constant


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    with needs("audit"):
        from scipy.stats import spearmanr

    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return float(spearmanr(xs, ys).statistic)
