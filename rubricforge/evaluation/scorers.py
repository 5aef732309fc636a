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
* ``healthbench`` (HealthBench's score, the column of HOTE's Table 1): every rubric item judged met / not met (one
  binary call each, the HOTE judge prompt; a negative item is "met" when the response shows its flaw), then per
  task Σ points of the met items / Σ positive points; the run's mean is clipped to [0, 1], as HealthBench clips
  its mean (:func:`healthbench_summary`), not each task.
* ``coverage`` (ResearchQA's rubric coverage, HOTE's and DR Tulu's tables): the share of the positive rubric items
  the response meets, by the same binary judgments (weights and negative items are not counted).
* ``drb2`` (DeepResearch Bench II): binary rubric items judged 1 / 0 / −1 in calls of ``eval.rubrics_per_call``,
  the share satisfied per dimension and overall (:mod:`rubricforge.evaluation.drb2`).

``settings`` (``cfg.eval``) chooses RACE's and FACT's prompts (``race_prompt=drb``, ``fact_prompt=drb``: DeepResearch
Bench's own, Chinese for a Chinese task: :func:`race_language`) and the items per ``drb2`` call; ``fact_judge``
judges the citations (default: ``judge``).

An empty report scores 0 everywhere without a judge call. A plugin's scorer (entry-point group
``rubricforge.scorers``, :mod:`rubricforge.plugins`) is called as ``await scorer(judge, task, report, reference)``
and returns the same shape.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from rubricforge.config import EvalConfig
from rubricforge.errors import UserError
from rubricforge.evaluation.citations import Resolve, fact, format_compliance
from rubricforge.evaluation.drb2 import drb2
from rubricforge.evaluation.exact import equivalence, exact_scores
from rubricforge.evaluation.tasks import SCORERS
from rubricforge.plugins import added
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.minddr.race import (RaceScore, parse_race_rubrics, race_pointwise, race_score,
                                     scored_dimensions)
from rubricforge.rewards.deeprubric.rubric_reward import JudgeMode, criteria_from, rubric_reward
from rubricforge.rewards.hote.rubric_reward import HoteScore, hote_reward
from rubricforge.schema import Criterion


async def score(name: str, judge: Judge, task: Mapping[str, Any], report: str, reference: str | None,
                judge_mode: JudgeMode, resolve: Resolve | None = None, settings: EvalConfig | None = None,
                fact_judge: Judge | None = None) -> dict[str, Any]:
    """One scorer's result for ``report`` on ``task`` (``reference``: the reference report, if any;
    ``resolve``: cited id -> corpus text, for ``citation``; ``settings``, ``fact_judge``: see the module docstring)."""
    settings = settings or EvalConfig()
    if name == "format":
        return format_compliance(report)
    if name == "citation":
        if resolve is None:
            raise UserError("the citation scorer needs the corpus index", "build it with `rubricforge corpus build`")
        question = str(task.get("question") or task.get("prompt") or "")
        return await fact(fact_judge or judge, question, report, resolve, settings.fact_prompt,
                          race_language(task, question))
    if name == "exact":
        exact = exact_scores(report, [str(task["answer"]), *map(str, task.get("answer_aliases") or [])])
        return {"metrics": {"exact.em": exact["em"], "exact.f1": exact["f1"]}}
    if name == "equivalence":
        return await equivalence(judge, str(task.get("question") or ""), report, str(task["answer"]),
                                 map(str, task.get("answer_aliases") or []))
    if name == "race":
        return await _race(judge, task, report, reference, settings.race_prompt)
    if name == "drb2":
        return await drb2(judge, task, report, settings.rubrics_per_call)
    if name in ("healthbench", "coverage"):
        criteria = criteria_from(task["rubrics"], where=f"task {task.get('id')!r} rubrics")
        met = await _met(judge, str(task.get("question", "")), report, criteria)
        value = (healthbench_score if name == "healthbench" else coverage_score)(met.per_rubric, criteria)
        return {"metrics": {name: value}, "per_criterion": met.per_rubric, "unscored": met.unscored}
    if name == "rubric":
        criteria = criteria_from(task["rubrics"], where=f"task {task.get('id')!r} rubrics")
        got = await rubric_reward(judge, str(task.get("question", "")), report, criteria, judge_mode)
        return {"metrics": {"rubric": got.value}, "per_criterion": got.per_criterion, "unscored": got.unscored}
    if (plugin := added("scorers", SCORERS).get(name)) is not None:
        return dict(await plugin(judge, task, report, reference))
    raise UserError(f"unknown scorer '{name}'", "use race, rubric, exact, equivalence, citation, format, healthbench, "
                                                "coverage or drb2")


_MET: weakref.WeakKeyDictionary[Judge, asyncio.Future[HoteScore]] = weakref.WeakKeyDictionary()


async def _met(judge: Judge, question: str, report: str, criteria: Sequence[Criterion]) -> HoteScore:
    """The met / not-met judgments of a task's items, made once per task's judge for both scorers that read them."""
    if judge not in _MET:
        _MET[judge] = asyncio.ensure_future(hote_reward(judge, question, report, criteria))
    return await _MET[judge]


def healthbench_score(met: Mapping[str, int | None], criteria: Sequence[Criterion]) -> float | None:
    """HealthBench per task: Σ points of the items judged met / Σ positive points (not clipped: HealthBench clips the
    mean); None when a judgment is missing or no item has positive points."""
    positive = sum(c.weight for c in criteria if c.weight > 0)
    if positive <= 0 or any(met.get(c.id) is None for c in criteria):
        return None
    return sum(c.weight for c in criteria if met[c.id]) / positive


def healthbench_summary(summary: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The run's ``healthbench`` entry with its mean and CI bounds clipped to [0, 1] (HealthBench's overall score:
    the clipped mean of the tasks' scores); {} when the run has none."""
    if "healthbench" not in summary:
        return {}
    entry = dict(summary["healthbench"])
    for key in ("mean", "ci_low", "ci_high"):
        if entry.get(key) is not None:
            entry[key] = min(1.0, max(0.0, entry[key]))
    return {"healthbench": entry}


def coverage_score(met: Mapping[str, int | None], criteria: Sequence[Criterion]) -> float | None:
    """ResearchQA-style rubric coverage: the share of positive items judged met; None when one is missing."""
    items = [c for c in criteria if c.weight > 0]
    if not items or any(met.get(c.id) is None for c in items):
        return None
    return sum(bool(met[c.id]) for c in items) / len(items)


def race_language(task: Mapping[str, Any], query: str) -> str:
    """DeepResearch Bench's prompt language of a task (RACE's and FACT's): its ``language`` column, else zh when the query has CJK
    characters (DRB's tasks carry the language in ``query.jsonl``, not in ``criteria.jsonl``)."""
    if task.get("language") in ("zh", "en"):
        return str(task["language"])
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in query) else "en"


async def _race(judge: Judge, task: Mapping[str, Any], report: str, reference: str | None,
                prompt: str = "minddr") -> dict[str, Any]:
    rubrics = parse_race_rubrics(task["race_rubrics"], f"task {task.get('id')!r}")
    mode = "reference" if reference else "pointwise"
    if not report:
        got = RaceScore(0.0, dict.fromkeys(scored_dimensions(rubrics), 0.0))
    elif reference:
        name = f"drb_race_{race_language(task, rubrics.query)}" if prompt == "drb" else "race_score"
        got = await race_score(judge, rubrics.query, report, reference, rubrics, name)
    else:
        got = await race_pointwise(judge, rubrics.query, report, rubrics)
    dimensions = got.dimensions if got.value is not None else dict.fromkeys(scored_dimensions(rubrics))
    metrics = {"race": got.value, **{f"race.{d}": v for d, v in dimensions.items()}}  # unscored: each dimension too
    return {"metrics": metrics, "mode": mode, "target": got.target, "reference": got.reference}
