"""Scores one agent rollout against its dataset example with every reward rubricforge implements.

:class:`Rollout` is what is scored: the example's columns (a dataset row), the completion (a string, or
TRL's list of chat messages) and optionally the rollout's :class:`~rubricforge.corpora.snippets.SnippetStore`.
Cited ids resolve against the transcript's own tool responses first, then the store.

:class:`RewardScorer` computes each component once per rollout (concurrent callers share one
computation, so TRL reward functions for the composite and for its parts judge each criterion once), on
top of the LLM cache (re-scoring a rollout later costs no judge call). Columns used:

* DeepRubric rewards: ``question``, ``rubrics`` (the evidence-tree export, or ``{title, description, weight}``
  rubrics); HOTE's Eq. 2 (``hote``) reads the same two;
* Report-RL (MindDR §5.3): ``race_rubrics`` (a :class:`~rubricforge.schema.RaceRubrics`, JSON string or
  mapping; its ``query`` is the task the report answers) and ``reference_report``; the tense check (App. 8.4,
  ``tense``) reads only the report;
* Search-RL (MindDR §5.2): ``question``, ``answer``, ``answer_aliases`` (optional), ``key_entities``
  (the KG export's columns);
* exact answers: ``answer_f1`` / ``answer_em`` are the SQuAD token F1 / normalised exact match of the final
  answer against ``answer`` and ``answer_aliases`` (:mod:`rubricforge.evaluation.exact`; no judge);
* preference-trained rubrics (Prefs §3.4 "Reward Assignment"): ``pref_rubric`` is S(r|y) of the answer under the row's ``rubrics``
  (e.g. written per query by a trained generator with ``rubricforge rubrics generate``), C.2 judge on 1–10.

:mod:`~rubricforge.rewards.registry` declares each reward once (group, columns, formula) and holds its
implementation: a built-in's is the method bound here with :func:`~rubricforge.rewards.registry.implements`, a
plugin's comes with its spec; :meth:`RewardScorer.details` dispatches from the registry.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.evaluation.exact import exact_scores
from rubricforge.rewards.minddr import alignment, report_rules, search_rl
from rubricforge.rewards.deeprubric.citation_reward import citation_reward
from rubricforge.rewards.deeprubric.composite import composite
from rubricforge.rewards.deeprubric.format_reward import format_reward
from rubricforge.rewards.hote.rubric_reward import hote_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.minddr.orm import orm_reward
from rubricforge.rewards.prefs.pref_score import pref_score, pref_score_from_ratings
from rubricforge.rewards.minddr.race import parse_race_rubrics, race_score
from rubricforge.rewards.registry import GROUPS, columns, implements, spec
from rubricforge.rewards.deeprubric.rubric_reward import criteria_from, rubric_reward
from rubricforge.rewards.deeprubric.search_reward import search_reward
from rubricforge.rewards.minddr.tense_check import detect_tense_errors, tense_penalty
from rubricforge.rewards.trajectory import Trajectory, cited_ids, parse_trajectory
from rubricforge.schema import RaceRubrics

if TYPE_CHECKING:
    from rubricforge.corpora.snippets import SnippetStore
    from rubricforge.llm import LLMClient

MEMO_SIZE = 4096
NO_TOOL = "no_tool"  # the row's ``environment`` in HOTE's no-tool mode
DEEPRUBRIC = GROUPS["deeprubric"]
REPORT = GROUPS["report"]
RUBRIC_SETS = {"rubric": "rubric", "composite": "rubric", "hote": "hote"}  # rewards judged per rubric -> that judge


def check_columns(rows: Iterable[Mapping[str, Any]], rewards: Iterable[str], where: str | Path,
                  prompt_column: str | None = None,
                  fix: str = "use a rubricforge export that has it, or choose rewards that do not need it (--rewards)"
                  ) -> None:
    """Before any work: a UserError naming the first example that lacks a column one of ``rewards`` reads
    (:func:`~rubricforge.rewards.registry.columns`), or ``prompt_column`` (a trainer's prompt)."""
    rewards = list(rewards)
    needed = dict.fromkeys([prompt_column] if prompt_column else [])
    for name in rewards:
        needed.update(dict.fromkeys(columns(name)))
    for row in rows:
        for column in needed:
            if row.get(column) in (None, "", []):
                reward = next((r for r in rewards if column in columns(r)), None)
                why = f" (the '{reward}' reward reads it)" if reward else " (the agent's prompt)"
                raise UserError(f"dataset {where}: example {row.get('id', '?')!r} has no '{column}' column{why}", fix)


def check_rubrics(rows: Iterable[Mapping[str, Any]], rewards: Iterable[str], where: str | Path) -> None:
    """Before any judge call, when one of ``rewards`` reads the ``rubrics`` column: a UserError naming the first row
    (and criterion) whose rubric set cannot be scored — an empty list, a criterion without text or weight, a
    criterion id used twice, or weights that sum to zero or less (every score would be 0 or undefined)."""
    if not any("rubrics" in columns(name) for name in rewards):
        return
    fix = "fix the row's rubrics in the dataset (or leave the row out)"
    for row in rows:
        rubrics, rid = row.get("rubrics"), row.get("id", "?")
        if rubrics is None:
            continue  # a missing column: check_columns says so
        if isinstance(rubrics, str) or not list(rubrics):
            raise UserError(f"dataset {where}: example {rid!r} has an empty rubric list" if not rubrics else
                            f"dataset {where}: example {rid!r} rubrics is text, not a list of criteria", fix)
        criteria = criteria_from(rubrics, where=f"dataset {where}: example {rid!r} rubrics")
        seen: dict[str, int] = {}
        for n, c in enumerate(criteria):
            if not c.description.strip():
                raise UserError(f"dataset {where}: example {rid!r} criterion {c.id!r} (rubrics[{n}]) has no text", fix)
            if c.id in seen:
                raise UserError(f"dataset {where}: example {rid!r} criterion id {c.id!r} is used twice "
                                f"(rubrics[{seen[c.id]}] and rubrics[{n}])", fix)
            seen[c.id] = n
        total = sum(c.weight for c in criteria)
        if total <= 0:
            raise UserError(f"dataset {where}: example {rid!r} criteria weights sum to {total:g} (criteria "
                            f"{', '.join(repr(c.id) for c in criteria)}); the total must be positive", fix)


@dataclass
class Rollout:
    example: Mapping[str, Any]
    completion: str | list[dict[str, Any]]
    snippets: SnippetStore | None = None

    @property
    def no_tool(self) -> bool:
        """A rollout of HOTE's no-tool mode (the row's ``environment``): tool-needing rewards leave it out."""
        return self.example.get("environment") == NO_TOOL

    def key(self) -> str:
        """What a score depends on: the example (with the rubrics it is judged on, which an evolving bank
        changes, and its mode), and the completion."""
        content = json.dumps([self.example.get("id"), self.example.get("question"), self.example.get("rubrics"),
                              self.example.get("environment"), self.completion],
                             sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(content.encode("utf-8")).hexdigest()

    def column(self, name: str) -> Any:
        value = self.example.get(name)
        if value is None:
            raise UserError(f"example {self.example.get('id', '?')!r} has no '{name}' column",
                            f"score it with rewards that do not need '{name}', or add the column to the dataset")
        return value


class RewardScorer:
    def __init__(self, cfg: Config, client: LLMClient, judge_role: str = "judge"):
        self.cfg = cfg
        self.judge = Judge(client, judge_role)
        # MindDR's ORM: one vote from each of up to three judge models, else `orm_votes` samples of the judge
        self.orm_judges = [Judge(client, r) for r in cfg.reward.orm_roles] or [self.judge]
        self.scheduler = search_rl.CoefficientScheduler()
        self._memo: OrderedDict[tuple[str, str], asyncio.Future[Any]] = OrderedDict()
        self._parsed: OrderedDict[str, Trajectory] = OrderedDict()

    # ------------------------------------------------------------ one component

    async def component(self, name: str, rollout: Rollout) -> float | None:
        """The value of one reward (a name of :func:`~rubricforge.rewards.registry.names`) for ``rollout``;
        None = unscored."""
        details = await self.details(name, rollout)
        return details["value"]

    @staticmethod
    def check_name(name: str) -> None:
        spec(name)

    async def details(self, name: str, rollout: Rollout) -> dict[str, Any]:
        fn = spec(name).fn
        assert fn is not None, f"reward {name} has no implementation"
        key = rollout.key() + (str(self.scheduler.weights) if name == "search_rl" else "")  # λ change per step
        return await self._once((name, key), lambda: fn(self, rollout))

    async def score(self, rollout: Rollout, names: tuple[str, ...] = DEEPRUBRIC) -> dict[str, dict[str, Any]]:
        """Every reward of ``names`` for one rollout: name -> {"value", ...details}."""
        got = await asyncio.gather(*(self.details(n, rollout) for n in names))
        return dict(zip(names, got, strict=True))

    async def _once(self, key: tuple[str, str],
                    compute: Callable[[], Coroutine[Any, Any, dict[str, Any]]]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        fut = self._memo.get(key)
        if fut is None or fut.get_loop() is not loop or (fut.done() and fut.exception() is not None):
            fut = self._memo[key] = loop.create_task(compute())
            # shielded: a cancelled caller leaves it running; its error is read here, not reported as unretrieved
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return await asyncio.shield(fut)

    # ------------------------------------------------------------ parsing shared by the components

    def _trajectory(self, rollout: Rollout) -> Trajectory:
        key = rollout.key()
        if (traj := self._parsed.get(key)) is None:
            traj = self._parsed[key] = parse_trajectory(rollout.completion)
            while len(self._parsed) > MEMO_SIZE:
                self._parsed.popitem(last=False)
        return traj

    def protocol(self, rollout: Rollout) -> str | None:
        """The rollout's tag protocol (:attr:`Trajectory.protocol`); None: none of the known tags."""
        return self._trajectory(rollout).protocol

    def _snippet_texts(self, traj: Trajectory, rollout: Rollout) -> dict[str, str]:
        texts = traj.snippet_texts()
        if rollout.snippets is not None and traj.answer:
            for sid in cited_ids(traj.answer):
                if sid not in texts and (snippet := rollout.snippets.get(sid)) is not None:
                    texts[sid] = snippet.text
        return texts

    # ------------------------------------------------------------ DeepRubric (Eq. 4, 5, 7, 8, App. A.4)

    @implements("rubric")
    async def _rubric(self, rollout: Rollout) -> dict[str, Any]:
        criteria = criteria_from(rollout.column("rubrics"), where=f"example {rollout.example.get('id', '?')!r} rubrics")
        got = await rubric_reward(self.judge, str(rollout.column("question")), self._trajectory(rollout).answer,
                                  criteria, self.cfg.reward.judge_mode)
        return {"value": got.value, "raw": got.raw, "per_criterion": got.per_criterion, "unscored": got.unscored}

    @implements("hote")
    async def _hote(self, rollout: Rollout) -> dict[str, Any]:
        criteria = criteria_from(rollout.column("rubrics"), where=f"example {rollout.example.get('id', '?')!r} rubrics")
        got = await hote_reward(self.judge, str(rollout.column("question")), self._trajectory(rollout).answer, criteria)
        return {"value": got.value, "per_criterion": got.per_rubric, "unscored": got.unscored}

    @implements("format")
    async def _format(self, rollout: Rollout) -> dict[str, Any]:
        traj = self._trajectory(rollout)
        got = format_reward(traj, no_tool=rollout.no_tool)
        return {"value": got.total, "components": got.components, "protocol": traj.protocol}

    @implements("search")
    async def _search(self, rollout: Rollout) -> dict[str, Any]:
        r = self.cfg.reward
        traj = self._trajectory(rollout)
        return {"value": search_reward(traj, upper=r.search_upper, distinct_queries=r.distinct_queries),
                "tool_calls": len(traj.tool_calls)}

    @implements("citation")
    async def _citation(self, rollout: Rollout) -> dict[str, Any]:
        traj = self._trajectory(rollout)
        got = await citation_reward(self.judge, str(rollout.column("question")), traj.answer,
                                    self._snippet_texts(traj, rollout))
        return {"value": got.value, "f1": got.f1, "r_fmt": got.r_fmt, "claims": len(got.claims),
                "format": got.format_detail}

    @implements("composite")
    async def _composite(self, rollout: Rollout) -> dict[str, Any]:
        names = ("rubric", "format") if rollout.no_tool else ("rubric", "format", "citation", "search")
        parts = await asyncio.gather(*(self.details(n, rollout) for n in names))
        values = {n: p["value"] for n, p in zip(names, parts, strict=True)}
        return {"value": composite(values, self.cfg.reward.weights), "components": values}

    @implements("pref_rubric")
    async def _pref_rubric(self, rollout: Rollout) -> dict[str, Any]:
        """Prefs Eq. 2 (S(r|y)) as the agent's reward. A rollout without an answer gets, without a judge call, the
        lowest S the rubric allows (no positive item met, every error item committed), so not answering
        never beats a poor answer."""
        criteria = criteria_from(rollout.column("rubrics"), where=f"example {rollout.example.get('id', '?')!r} rubrics")
        answer = self._trajectory(rollout).answer
        if answer is None or not answer.strip():
            worst = {c.id: 10 if c.weight < 0 else 1 for c in criteria}
            return {"value": pref_score_from_ratings(worst, criteria), "ratings": worst, "unscored": 0}
        got = await pref_score(self.judge, str(rollout.column("question")), answer, criteria)
        return {"value": got.value, "ratings": got.ratings, "unscored": got.unscored}

    # ------------------------------------------------------------ Report-RL (MindDR Eq. 10–12)

    def _report_text(self, rollout: Rollout) -> str:
        """The report: the answer, else an unclosed answer's text, else the last turn."""
        traj = self._trajectory(rollout)
        if traj.answer is not None:
            return traj.answer
        return traj.partial_answer or (traj.steps[-1].text if traj.steps else "")

    @implements("race")
    async def _race(self, rollout: Rollout) -> dict[str, Any]:
        rubrics = _race_rubrics(rollout)
        got = await race_score(self.judge, rubrics.query, self._report_text(rollout),
                               str(rollout.column("reference_report")), rubrics)
        return {"value": got.value, "dimensions": got.dimensions, "target": got.target, "reference": got.reference}

    @implements("report_citation")
    async def _report_citation(self, rollout: Rollout) -> dict[str, Any]:
        traj = self._trajectory(rollout)
        tag = self.cfg.reward.answer_tag
        n_ref = report_rules.count_citations(str(rollout.column("reference_report")), tag=tag)
        counts = report_rules.count_report_citations(self._report_text(rollout), self._snippet_texts(traj, rollout),
                                                     tau=self.cfg.reward.citation_relevance_threshold, tag=tag)
        return {"value": report_rules.report_citation_reward(counts.n_gen, n_ref, counts.n_valid),
                "n_gen": counts.n_gen, "n_ref": n_ref, "n_valid": counts.n_valid}

    @implements("report_format")
    async def _report_format(self, rollout: Rollout) -> dict[str, Any]:
        completion = rollout.completion if isinstance(rollout.completion, str) else "\n".join(
            step.text for step in self._trajectory(rollout).steps)
        v = report_rules.report_format_violations(completion, tag=self.cfg.reward.answer_tag)
        return {"value": v.reward, "v_tag": v.v_tag, "v_md": v.v_md, "v_ref": v.v_ref,
                "details": list(v.details)}

    @implements("report")
    async def _report(self, rollout: Rollout) -> dict[str, Any]:
        race, cite, fmt = await asyncio.gather(*(self.details(n, rollout)
                                                 for n in ("race", "report_citation", "report_format")))
        r = self.cfg.reward
        value = report_rules.report_reward(race["value"], cite["value"], fmt["value"], r.report_lambda_cite,
                                           r.report_lambda_format)
        return {"value": value, "race": race["value"], "citation": cite["value"], "format": fmt["value"]}

    @implements("tense")
    async def _tense(self, rollout: Rollout) -> dict[str, Any]:
        """MindDR App. 8.4 on the report: predictions for a period that ended before ``reward.tense_today``
        (default: today) with no forecasting institution named nearby; see :func:`tense_penalty`."""
        findings = await detect_tense_errors(self.judge, self._report_text(rollout),
                                             self.cfg.reward.tense_today or date.today())
        return {"value": tense_penalty(findings), "candidates": len(findings),
                "errors": [f.candidate.matched_text for f in findings if f.error],
                "unscored": sum(f.error is None for f in findings)}

    @implements("alignment")
    async def _alignment(self, rollout: Rollout) -> dict[str, Any]:
        """MindDR §5.4's pair score s(x, y) (:mod:`~rubricforge.rewards.minddr.alignment`): the independent judges'
        dimensions and tense accuracy, minus the rule-based hard penalties of Eqs. 10–11."""
        question, report = str(rollout.column("question")), self._report_text(rollout)
        judged = await asyncio.gather(*(self.judge.ask(
            "alignment_dimension", alignment.DimensionScore, stage="alignment", question=question, dimension=name,
            definition=text, report=report) for name, text in alignment.DIMENSIONS.items()))
        tense, cite, fmt = await asyncio.gather(*(self.details(n, rollout)
                                                  for n in ("tense", "report_citation", "report_format")))
        violations = fmt["v_tag"] + fmt["v_md"] + fmt["v_ref"] + int(cite["value"] == -1.0)
        scores = [None if j is None else j.score for j in judged]
        value = alignment.alignment_score(scores, tense["value"], violations, self.cfg.reward.alignment_penalty)
        return {"value": value, "dimensions": dict(zip(alignment.DIMENSIONS, scores, strict=True)),
                "tense": tense["value"], "violations": violations}

    # ------------------------------------------------------------ Search-RL (MindDR Eq. 6–9)

    def _entities(self, rollout: Rollout) -> list[str]:
        entities = rollout.column("key_entities")
        return [entities] if isinstance(entities, str) else list(entities)

    @implements("prm")
    async def _prm(self, rollout: Rollout) -> dict[str, Any]:
        return {"value": search_rl.prm_reward(self._trajectory(rollout), self._entities(rollout))}

    @implements("orm")
    async def _orm(self, rollout: Rollout) -> dict[str, Any]:
        aliases = rollout.example.get("answer_aliases") or []
        got = await orm_reward(self.orm_judges, str(rollout.column("question")), self._trajectory(rollout).answer,
                               str(rollout.column("answer")), list(aliases), votes=self.cfg.reward.orm_votes)
        return {"value": got.value, "votes": got.votes}

    @implements("search_rl")
    async def _search_rl(self, rollout: Rollout) -> dict[str, Any]:
        orm = await self.details("orm", rollout)
        got = search_rl.search_rl_reward(self._trajectory(rollout), self._entities(rollout), orm["value"],
                                         self.scheduler.weights)
        return {"value": got.total, **{k: v for k, v in asdict(got).items() if k != "total"}}

    # ------------------------------------------------------------ exact answers (no judge)

    def _exact(self, rollout: Rollout) -> dict[str, float]:
        """``{"em", "f1"}`` of the closed ``<answer>`` against the row's answer and aliases, the best over them;
        a rollout without a closed answer scores 0 on both."""
        answer = self._trajectory(rollout).answer
        if answer is None:
            return {"em": 0.0, "f1": 0.0}
        return exact_scores(answer, [str(rollout.column("answer")), *map(str, rollout.example.get("answer_aliases") or [])])

    @implements("answer_f1")
    async def _answer_f1(self, rollout: Rollout) -> dict[str, Any]:
        """Token F1 of the closed answer (:meth:`_exact`): partial credit, so text that restates the question's
        words around the answer earns some."""
        got = self._exact(rollout)
        return {"value": got["f1"], "em": got["em"]}

    @implements("answer_em")
    async def _answer_em(self, rollout: Rollout) -> dict[str, Any]:
        """Exact match of the closed answer (:meth:`_exact`): no partial credit."""
        got = self._exact(rollout)
        return {"value": got["em"], "f1": got["f1"]}


def _race_rubrics(rollout: Rollout) -> RaceRubrics:
    return parse_race_rubrics(rollout.column("race_rubrics"), f"example {rollout.example.get('id', '?')!r}")
