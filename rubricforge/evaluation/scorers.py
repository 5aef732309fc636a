"""The scorers, each the papers' definition, over one task and its report; each returns
``{"metrics": {name: value or None}, ...details}`` with its headline metric first (None = unscored, never 0).

* ``race`` (MindDR App. 8.3; DeepResearch Bench's RACE): with a reference report, the reference-relative
  S(target) / (S(target) + S(reference)) of :func:`~rubricforge.rewards.minddr.race.race_score`; without one the
  pointwise S(target) / 10 of :func:`~rubricforge.rewards.minddr.race.race_pointwise`; per dimension too
  (``race.<dimension>``), with the task's dimension weights.
* ``rubric`` (DeepRubric Eq. 4): :func:`~rubricforge.rewards.deeprubric.rubric_reward.rubric_reward`, 0–4 per criterion,
  weighted, in [0, 1]; the judge mode is ``reward.judge_mode``.
* ``exact``: normalised exact match and token F1 against the answer and its aliases (``exact.em``,
  ``exact.f1``; :mod:`rubricforge.evaluation.exact`).
* ``equivalence``: the LLM judge of whether the response's final answer is equivalent to the answer
  (BrowseComp's grading, MindDR's ORM judgment; ``equivalence`` in {0, 1}; :func:`~rubricforge.evaluation.exact.equivalence`).
* ``citation``: DeepResearch Bench's FACT against the local corpus (``citation.precision``,
  ``citation.supported``; :mod:`rubricforge.evaluation.citations`).
* ``format``: format compliance of the report body (MindDR Eq. 11's checks; ``format``, ``format.markdown``,
  ``format.cite``).

An empty report scores 0 everywhere without a judge call. A plugin's scorer (entry-point group
``rubricforge.scorers``, :mod:`rubricforge.plugins`) is called as ``await scorer(judge, task, report, reference)``
and returns the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rubricforge.errors import UserError
from rubricforge.evaluation.citations import Resolve, fact, format_compliance
from rubricforge.evaluation.exact import equivalence, exact_scores
from rubricforge.evaluation.tasks import SCORERS
from rubricforge.plugins import added
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.minddr.race import (RaceScore, parse_race_rubrics, race_pointwise, race_score,
                                     scored_dimensions)
from rubricforge.rewards.deeprubric.rubric_reward import JudgeMode, criteria_from, rubric_reward


async def score(name: str, judge: Judge, task: Mapping[str, Any], report: str, reference: str | None,
                judge_mode: JudgeMode, resolve: Resolve | None = None) -> dict[str, Any]:
    """One scorer's result for ``report`` on ``task`` (``reference``: the reference report, if any;
    ``resolve``: cited id -> corpus text, for ``citation``)."""
    if name == "format":
        return format_compliance(report)
    if name == "citation":
        if resolve is None:
            raise UserError("the citation scorer needs the corpus index", "build it with `rubricforge corpus build`")
        return await fact(judge, str(task.get("question") or task.get("prompt") or ""), report, resolve)
    if name == "exact":
        exact = exact_scores(report, [str(task["answer"]), *map(str, task.get("answer_aliases") or [])])
        return {"metrics": {"exact.em": exact["em"], "exact.f1": exact["f1"]}}
    if name == "equivalence":
        return await equivalence(judge, str(task.get("question") or ""), report, str(task["answer"]),
                                 map(str, task.get("answer_aliases") or []))
    if name == "race":
        return await _race(judge, task, report, reference)
    if name == "rubric":
        criteria = criteria_from(task["rubrics"], where=f"task {task.get('id')!r} rubrics")
        got = await rubric_reward(judge, str(task.get("question", "")), report, criteria, judge_mode)
        return {"metrics": {"rubric": got.value}, "per_criterion": got.per_criterion, "unscored": got.unscored}
    if (plugin := added("scorers", SCORERS).get(name)) is not None:
        return dict(await plugin(judge, task, report, reference))
    raise UserError(f"unknown scorer '{name}'", "use race, rubric, exact, equivalence, citation or format")


async def _race(judge: Judge, task: Mapping[str, Any], report: str, reference: str | None) -> dict[str, Any]:
    rubrics = parse_race_rubrics(task["race_rubrics"], f"task {task.get('id')!r}")
    mode = "reference" if reference else "pointwise"
    if not report:
        got = RaceScore(0.0, dict.fromkeys(scored_dimensions(rubrics), 0.0))
    elif reference:
        got = await race_score(judge, rubrics.query, report, reference, rubrics)
    else:
        got = await race_pointwise(judge, rubrics.query, report, rubrics)
    metrics = {"race": got.value, **{f"race.{d}": v for d, v in got.dimensions.items()}}
    return {"metrics": metrics, "mode": mode, "target": got.target, "reference": got.reference}
