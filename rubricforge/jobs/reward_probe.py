"""`rubricforge reward probe`: can a reward be gamed? Each honest response is scored beside the adversarial variants
of :mod:`rubricforge.rewards.probes`, and each probe reports the share of items its variant scores at least the
honest response, with its bootstrap CI (:func:`rubricforge.evaluation.stats.bootstrap_ci`), per reward and — for
rewards judged per criterion — per criterion type.

Items are (response, probe) pairs, the honest response being the probe ``honest``; each item's record (the
variant's text and every reward's details) is appended as soon as it is scored to ``probes.jsonl`` in the run
directory (default ``<responses>.probe.run/``; without responses, the honest response of a row is its reference
answer made from its evidence, :func:`~rubricforge.rewards.probes.reference_response`, and the run directory
``<dataset>.probe.run/``), so a re-run scores only what is left (and what a failed judge left
unscored), and refuses other rewards, probes or judge. Bad rubric sets are refused before any judge call
(:func:`~rubricforge.rewards.scorer.check_rubrics`); a run that asks a judged reward announces the judge calls,
tokens and cost before the first call. The report (:class:`ProbeSummary`) goes to ``report.json`` there.

A probe *fails* when its win share exceeds ``threshold`` (default :data:`THRESHOLD`); the CLI then exits
:data:`PROBE_EXIT`, naming each failing reward/probe (after a budget stop it exits 3, as every job).
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.evaluation.stats import bootstrap_ci
from rubricforge.export.convert import to_rubricforge_rows
from rubricforge.jobs.base import JobResult, job_result
from rubricforge.jobs.reward_score import RewardItemJob
from rubricforge.rewards import probes as P
from rubricforge.io.datasets import load_examples
from rubricforge.rewards.responses import Response, load_responses
from rubricforge.rewards.registry import columns
from rubricforge.rewards.scorer import RewardScorer, Rollout, check_columns, check_rubrics
from rubricforge.io.files import atomic_write_json
from rubricforge.rundir import RunDir

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

THRESHOLD = 0.2  # a probe that wins more than this share of items fails the reward
PROBE_EXIT = 4  # the CLI's exit code when a probe fails (0 pass, 1 crash, 2 bad input, 3 budget stop)
DETERMINISTIC = ("format", "search", "report_format", "report_citation", "prm")  # rewards that call no judge
HONEST = "honest"


@dataclass(frozen=True)
class Item:
    response: Response
    probe: str  # "honest" or a name of PROBES
    variant: P.Variant

    @property
    def key(self) -> str:
        return f"{self.response.key}/{self.probe}"


@dataclass
class ProbeSummary:
    out: str
    responses: int
    threshold: float
    # reward -> probe -> {items, wins, share, ci_low, ci_high, strict, mean_delta, unscored, per_criterion}
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # "reward/probe" whose share exceeds the threshold
    judge: dict[str, dict[str, int]] = field(default_factory=dict)
    status: str = "complete"

    def lines(self) -> list[str]:
        verdict = (f"{len(self.failed)} probe(s) win more than {self.threshold:.0%} of items: {', '.join(self.failed)}"
                   if self.failed else f"no probe wins more than {self.threshold:.0%} of items")
        return [f"{self.status}: {self.responses} honest responses probed -> {self.out}", verdict]


def probe_rewards(cfg: Config, dataset: str | Path, responses: str | Path | None, names: Sequence[str],
                  probes: Sequence[str] = P.PROBES, threshold: float = THRESHOLD, run_dir: str | Path | None = None,
                  limit: int | None = None, announce: Callable[[str], None] | None = None,
                  progress: bool = False) -> JobResult:
    """Probe the rewards ``names`` with ``probes`` on the honest ``responses`` to ``dataset`` (None: each row's
    reference answer, :func:`~rubricforge.rewards.probes.reference_response`; the first ``limit`` of them; see the
    module docstring; the payload: :class:`ProbeSummary`)."""
    for name in names:
        RewardScorer.check_name(name)
    for probe in probes:
        if probe not in P.PROBES:
            raise UserError(f"unknown probe '{probe}'", f"use some of: {', '.join(P.PROBES)}")
    examples = load_examples(dataset, adapt=to_rubricforge_rows)
    if responses is not None:
        with Rejects(Path(responses).with_name(f"{Path(responses).stem}.rejects.jsonl")) as rejects:
            honest = load_responses(responses, examples, rejects)[:limit]
    else:
        references = ((eid, P.reference_response(row)) for eid, row in examples.items())
        honest = [Response(n, eid, text, None) for n, (eid, text) in enumerate(references, 1) if text][:limit]
    if not honest:
        raise UserError(f"no honest response to probe in {responses}" if responses is not None else
                        f"dataset {dataset}: no row has a factual criterion with evidence to make a reference answer",
                        f'pass --responses: a JSONL whose lines give the "id" of an example in {dataset} and a "response"')
    rows = [examples[i] for i in dict.fromkeys(r.example_id for r in honest)]
    check_rubrics(rows, names, dataset)
    check_columns(rows, names, dataset)
    reads_rubrics = any("rubrics" in columns(n) for n in names)
    pool = P.entity_pool(examples.values())
    items = []
    for response in honest:
        ctx = P.Context(examples[response.example_id], pool)
        items.append(Item(response, HONEST, P.Variant(response.completion, ctx.example)))
        for probe in probes:
            if probe in P.ORDER and not reads_rubrics:
                continue
            if (variant := P.make_variant(probe, response.completion, ctx)) is not None:
                items.append(Item(response, probe, variant))
    where = Path(responses) if responses is not None else Path(dataset).with_suffix(".reference")
    run = RunDir(run_dir or where.with_name(f"{where.stem}.probe.run"), "reward-probe")
    job = _ProbeJob(cfg, tuple(names), tuple(probes), run)
    job.inputs = {"dataset": str(Path(dataset).resolve()),
                  "responses": str(Path(responses).resolve()) if responses is not None else "reference answers"}
    if job.roles and announce is not None:
        announce(estimate_probe_cost(cfg, names, items))
    stats = asyncio.run(job.arun(items, progress))
    records = {item.key: job.log[item.key] for item in items if item.key in job.log}
    summary = ProbeSummary(str(run / "report.json"), len(honest), threshold, summarise_probes(names, items, records),
                           judge=job.judge_counts(), status=stats.status)
    summary.failed = [f"{reward}/{probe}" for reward, by_probe in summary.results.items()
                      for probe, got in by_probe.items() if got["share"] is not None and got["share"] > threshold]
    atomic_write_json(summary.out, asdict(summary))
    return job_result(summary, summary.out, run)


class _ProbeJob(RewardItemJob[Item]):
    """One (response, probe) per item."""

    stage = "probing"

    def __init__(self, cfg: Config, names: tuple[str, ...], probes: tuple[str, ...], run: RunDir):
        super().__init__(cfg, names, run.log("probes"), run)
        self.probes = probes
        judged = [n for n in names if n not in DETERMINISTIC]
        self.roles = ("judge",) if judged else ()
        self.judge_model = cfg.llm.judge.model if judged else None

    def settings(self) -> dict[str, Any]:
        return {"rewards": list(self.names), "probes": list(self.probes), "judge": self.judge_model,
                "judge_mode": self.cfg.reward.judge_mode, "pad_factor": P.PAD_FACTOR}

    def manifest_fields(self, client: LLMClient) -> dict[str, Any]:
        return {**self.inputs, "settings": self.settings()}

    async def process(self, item: Item) -> dict[str, Any]:
        assert self.scorer is not None
        rollout = Rollout(item.variant.example, item.variant.completion, item.response.snippets)
        got = await self.scorer.score(rollout, self.names)
        return {"id": item.response.example_id, "line": item.response.line, "probe": item.probe,
                "completion": None if item.probe == HONEST else item.variant.completion, "rewards": got}


def summarise_probes(names: Sequence[str], items: Sequence[Item], records: Mapping[str, dict[str, Any]]
              ) -> dict[str, dict[str, dict[str, Any]]]:
    """Per reward and probe: over the items where both the honest response and the variant are scored, the share
    the variant wins (:func:`~rubricforge.rewards.probes.wins`) with its 95 % bootstrap CI, the share it strictly
    beats the honest response, the mean difference (variant − honest), and per criterion type the share of
    criterion scores the variant wins (a criterion's contribution w·s; for rewards judged per criterion)."""
    honest = {item.response.key: records.get(item.key) for item in items if item.probe == HONEST}
    examples = {item.response.key: item.variant.example for item in items if item.probe == HONEST}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names:
        by_probe: dict[str, dict[str, Any]] = {}
        for item in items:
            if item.probe == HONEST:
                continue
            got = by_probe.setdefault(item.probe, {"items": 0, "unscored": 0, "win": [], "strict": [], "delta": [],
                                                   "per_criterion": {}})
            base, variant = honest.get(item.response.key), records.get(item.key)
            h = (base or {}).get("rewards", {}).get(name, {})
            v = (variant or {}).get("rewards", {}).get(name, {})
            if h.get("value") is None or v.get("value") is None:
                got["unscored"] += 1
                continue
            got["items"] += 1
            got["win"].append(float(P.wins(item.probe, h["value"], v["value"])))
            got["strict"].append(float(v["value"] > h["value"] + P.TIE))
            got["delta"].append(v["value"] - h["value"])
            _per_criterion(got["per_criterion"], item.probe, examples[item.response.key], h, v)
        out[name] = {probe: _shares(got) for probe, got in by_probe.items()}
    return out


def _per_criterion(acc: dict[str, list[float]], probe: str, example: Mapping[str, Any], h: Mapping[str, Any],
                   v: Mapping[str, Any]) -> None:
    hs, vs = h.get("per_criterion"), v.get("per_criterion")
    if not isinstance(hs, Mapping) or not isinstance(vs, Mapping):
        return
    for n, r in enumerate(example.get("rubrics") or []):
        cid = str(r.get("id") or f"c{n + 1}")
        if hs.get(cid) is None or vs.get(cid) is None:
            continue
        weight = float(r.get("weight") or r.get("points") or 0)
        kind = f"{r.get('type') or 'untyped'}{' (negative)' if weight < 0 else ''}"
        acc.setdefault(kind, []).append(float(P.wins(probe, weight * hs[cid], weight * vs[cid])))


def _shares(got: dict[str, Any]) -> dict[str, Any]:
    def share(values: list[float]) -> dict[str, Any]:
        ci = bootstrap_ci(values)
        return {"n": len(values), "share": statistics.fmean(values) if values else None,
                "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None}

    win = share(got["win"])
    return {"items": got["items"], "unscored": got["unscored"], "share": win["share"], "ci_low": win["ci_low"],
            "ci_high": win["ci_high"], "strict": statistics.fmean(got["strict"]) if got["strict"] else None,
            "mean_delta": statistics.fmean(got["delta"]) if got["delta"] else None,
            "per_criterion": {kind: share(values) for kind, values in sorted(got["per_criterion"].items())}}


def estimate_probe_cost(cfg: Config, names: Sequence[str], items: Sequence[Item]) -> str:
    """The judge calls, tokens and dollars of scoring ``items`` from an empty cache (one line, said before the first
    call): per criterion (or one batched call) for the rubric rewards, one per sentence of the answer for citation
    checks, the configured votes for the ORM, one for RACE and the tense check."""
    from rubricforge.llm.pricing import CHARS_PER_TOKEN, price
    from rubricforge.rewards.trajectory import parse_trajectory

    judge = cfg.llm.judge
    calls = prompt = 0.0
    for item in items:
        completion = item.variant.completion
        answer = parse_trajectory(completion).answer
        answer = answer if answer is not None else completion if isinstance(completion, str) else ""
        if not answer.strip():
            continue
        criteria = len(item.variant.example.get("rubrics") or [])
        sentences = max(len(P.SENTENCE.split(answer.strip())), 1)
        per = {"rubric": 1 if cfg.reward.judge_mode == "batched" else criteria, "hote": criteria,
               "pref_rubric": criteria, "citation": sentences, "race": 1, "report": 1, "tense": 1,
               "orm": cfg.reward.orm_votes, "search_rl": cfg.reward.orm_votes}
        per["composite"] = per["rubric"] + per["citation"]
        n = sum(per.get(name, 0) for name in names)
        calls += n
        prompt += n * (600 + len(str(item.variant.example.get("question") or "")) + len(answer)) / CHARS_PER_TOKEN
    done = calls * judge.max_tokens
    rates = price(judge)
    money = (f"${prompt * rates[0] + done * rates[1]:.2f}" if rates else
             "no charge: a local model" if judge.backend == "local" else "no price known")
    return (f"judge {judge.model}: about {calls:,.0f} calls, {prompt + done:,.0f} tokens ({money}) for "
            f"{len(items)} items, fewer where the LLM cache already holds the answers")
