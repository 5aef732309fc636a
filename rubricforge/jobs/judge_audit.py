"""`rubricforge judge audit`: how often the configured judge agrees with people on whether a report covers a rubric
point, per rubric category, judging one point per call and all of a report's points in one call.

Each labelled report (:mod:`rubricforge.evaluation.labels`) is judged twice by the rubric judge of the rewards
(:func:`~rubricforge.rewards.deeprubric.rubric_reward.rubric_reward`, DeepRubric Fig. 5's 0–4 scale): ``per_criterion`` (one
call per point) and ``batched`` (one call for all of them). A point counts as covered when its score is at least
``covered_at`` (default 3: "mostly satisfies"). Per mode and category: balanced accuracy (the mean of the recall on
covered and on uncovered points, :func:`~rubricforge.evaluation.stats.balanced_accuracy`), over all points
(``overall``) and the mean over categories (``macro``, RuVerBench's headline); batched − per-call differences; judge
calls and tokens per mode. Unscored points are left out and counted.

The run directory (``pipeline: judge-audit``) holds ``verdicts.jsonl`` — one record per (mode, report), appended as
soon as it is judged: ``{"key": "<mode>:<id>", "id", "mode", "scores": [0–4 or null per point], "calls"}`` — then
``summary.json``, ``manifest.json`` (with the judge's ledger: tokens per stage, ``rubric`` = per-call, ``rubric_batched``
= batched) and ``config.yaml``. The same command again judges only what is missing or has an unscored point (a
record judged again replaces the old one); a run made with another labels file or judge is refused. By the one
ending rule (:mod:`rubricforge.jobs.base`) it is ``complete`` only when every point has a score in both modes, else
``incomplete: <n> of <m> points unscored`` (the CLI exits 1: re-run to retry them) or ``stopped: <why>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.evaluation.labels import LabelledReport, load_labels
from rubricforge.evaluation.stats import balanced_accuracy
from rubricforge.jobs.base import JobResult, incomplete, job_result
from rubricforge.jobs.items import ItemJob, ItemStats
from rubricforge.io.files import atomic_write_json
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

JOB_KIND = "judge-audit"
LOG = "verdicts"
MODES = ("per_criterion", "batched")
STAGES = {"per_criterion": "rubric", "batched": "rubric_batched"}  # the judge's ledger stage of each mode
COVERED_AT = 3


@dataclass
class JudgeAuditSummary:
    run_dir: str
    status: str
    reports: int
    points: int
    judge_model: str
    covered_at: int
    judged_now: int  # (mode, report) records made by this invocation
    modes: dict[str, dict[str, Any]] = field(default_factory=dict)
    delta: dict[str, Any] = field(default_factory=dict)  # batched − per_criterion balanced accuracies

    def lines(self) -> list[str]:
        calls = [f"{mode}: {m['overall']['n']} of {self.points} points scored, {m['calls']} judge calls "
                 f"({m['calls_per_report']:.1f} per report), {m['tokens']['prompt_tokens']} prompt + "
                 f"{m['tokens']['completion_tokens']} completion tokens (uncached requests: {m['tokens']['requests']})"
                 for mode, m in self.modes.items()]
        return [*calls, f"{self.status.split(':', 1)[0]}: {self.reports} reports, {self.points} points, judge "
                        f"{self.judge_model} (covered = score >= {self.covered_at}) -> {self.run_dir}/summary.json"]


def audit_judge(cfg: Config, labels_path: str | Path, run_dir: str | Path, covered_at: int = COVERED_AT,
                progress: bool = True) -> JobResult:
    """Judge every labelled report in both modes into ``run_dir`` and summarise (see the module docstring; the
    payload: :class:`JudgeAuditSummary`)."""
    reports = load_labels(labels_path)
    run = RunDir(run_dir, JOB_KIND)
    run.check_kind()
    log: StageLog[Any] = run.log(LOG)
    judge_model = cfg.llm.role("judge").model
    settings = {"labels": str(Path(labels_path).resolve()),
                "labels_sha": hashlib.sha256(Path(labels_path).read_bytes()).hexdigest()[:16], "judge": judge_model,
                "api_base": cfg.llm.judge.api_base}
    job = _AuditJob(cfg, run, {r.id: r for r in reports}, settings, log)
    job.check_settings()  # verdicts of another labels file or judge are refused before anything is written
    stats = asyncio.run(job.arun([(mode, r.id) for mode in MODES for r in reports], progress))
    points = sum(len(r.points) for r in reports)
    by_stage = run.manifest().get("ledger", {}).get("by_stage", {})
    modes = {mode: _mode_summary(reports, log, mode, covered_at, by_stage.get(STAGES[mode], {})) for mode in MODES}
    summary = JudgeAuditSummary(str(run.path), stats.status, len(reports), points, judge_model, covered_at,
                                stats.done_now, modes, _delta(modes))
    atomic_write_json(run / "summary.json", asdict(summary))
    return job_result(summary, run / "summary.json", run)


def _accuracy(pairs: Sequence[tuple[bool, bool]], unscored: int) -> dict[str, Any]:
    labels, predicted = [y for y, _ in pairs], [p for _, p in pairs]
    return {"n": len(pairs), "unscored": unscored, "covered": sum(labels),
            "balanced_accuracy": balanced_accuracy(labels, predicted),
            "accuracy": sum(y == p for y, p in pairs) / len(pairs) if pairs else None}


def _mode_summary(reports: Sequence[LabelledReport], log: StageLog[Any], mode: str, covered_at: int,
                  ledger: dict[str, Any]) -> dict[str, Any]:
    """Balanced accuracy per category, overall and macro, with the mode's calls and tokens."""
    pairs: dict[str, list[tuple[bool, bool]]] = {}
    unscored: dict[str, int] = {}
    calls = 0
    for report in reports:
        record = log.get(f"{mode}:{report.id}")
        scores = record["scores"] if record else [None] * len(report.points)
        calls += record["calls"] if record else 0
        for point, score in zip(report.points, scores, strict=True):
            pairs.setdefault(point.category, [])
            unscored.setdefault(point.category, 0)
            if score is None:
                unscored[point.category] += 1
            else:
                pairs[point.category].append((point.covered, score >= covered_at))
    categories = {c: _accuracy(pairs[c], unscored[c]) for c in sorted(pairs)}
    per_category = [v["balanced_accuracy"] for v in categories.values() if v["balanced_accuracy"] is not None]
    return {"categories": categories,
            "overall": _accuracy([p for c in pairs.values() for p in c], sum(unscored.values())),
            "macro": statistics.fmean(per_category) if per_category else None,
            "calls": calls, "calls_per_report": calls / len(reports),
            "tokens": {k: int(ledger.get(k, 0)) for k in ("requests", "prompt_tokens", "completion_tokens")}}


def _delta(modes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    one, batched = modes["per_criterion"], modes["batched"]
    return {"overall": diff(one["overall"]["balanced_accuracy"], batched["overall"]["balanced_accuracy"]),
            "macro": diff(one["macro"], batched["macro"]),
            "categories": {c: diff(v["balanced_accuracy"], batched["categories"][c]["balanced_accuracy"])
                           for c, v in one["categories"].items()}}


class _AuditJob(ItemJob[tuple[str, str]]):
    """One (mode, report id) per item, grouped by mode; a record is finished when every point has a score. Its
    manifest (the base's) holds the settings that guard a resume."""

    stage = "judging"
    roles = ("judge",)

    def __init__(self, cfg: Config, run: RunDir, reports: dict[str, LabelledReport], settings: dict[str, Any],
                 log: StageLog[Any]):
        super().__init__(log, cfg.llm, cfg.reward.concurrency, run, cfg)
        self.reports, self._settings = reports, settings

    def key(self, item: tuple[str, str]) -> str:
        return f"{item[0]}:{item[1]}"

    def group(self, item: tuple[str, str]) -> str:
        return item[0]

    def settings(self) -> dict[str, Any]:
        return self._settings

    def finished(self, record: dict[str, Any] | None) -> bool:
        return record is not None and None not in record["scores"]

    def counts(self, stats: ItemStats) -> dict[str, Any]:
        return {"reports": len(self.reports), "points": sum(len(r.points) for r in self.reports.values())}

    def incomplete(self, undone: list[str], total: int) -> str:
        """Counted in points (over both modes), not in (mode, report) items."""
        def unscored(key: str) -> int:
            record, points = self.log.get(key), self.reports[key.split(":", 1)[1]].points
            return len(points) if record is None else sum(s is None for s in record["scores"])

        points = sum(len(r.points) for r in self.reports.values()) * len(MODES)
        return incomplete(sum(map(unscored, undone)), points, "points unscored (both modes)")

    def open(self, client: LLMClient) -> None:
        self.client = client

    async def process(self, item: tuple[str, str]) -> dict[str, Any]:
        from rubricforge.rewards.judging import Judge
        from rubricforge.rewards.deeprubric.rubric_reward import MAX_SCORE, criteria_from, rubric_reward

        mode, rid = item
        report = self.reports[rid]
        judge = Judge(self.client)  # one per item: its calls are the item's
        criteria = criteria_from([{"id": f"p{i + 1}", "description": p.text, "weight": 1.0}
                                  for i, p in enumerate(report.points)], where=f"report {rid!r} rubric")
        got = await rubric_reward(judge, report.question, report.response, criteria, mode)  # type: ignore[arg-type]
        scores = [None if (s := got.per_criterion[c.id]) is None else round(s * MAX_SCORE) for c in criteria]
        return {"id": rid, "mode": mode, "scores": scores, "calls": sum(judge.calls.values())}
