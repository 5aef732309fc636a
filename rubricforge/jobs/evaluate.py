"""`rubricforge eval`: score existing reports on a task set, resumably, and summarise them with confidence
intervals; `rubricforge eval compare`: two runs compared task by task.

A run directory (``job: eval``) holds ``tasks.jsonl`` — one record per task, appended as soon as it is
scored: ``{"key": <task id>, "id", "report_sha", "scorers", "scores": {scorer: {"metrics", ...}},
"metrics": {metric: value}, "judge_calls": {stage: n}}`` — then ``summary.json`` (per metric: n, unscored,
mean, std, min, max and the bootstrap 95 % CI; judge calls per task and tokens per stage), ``report.html``,
``manifest.json``, ``config.yaml`` and ``rejects.jsonl`` (report lines that were skipped). The same command
again scores only tasks that are missing, whose report (or reference) changed, or that have an unscored
metric (a judge that was down is asked again; the LLM cache answers what it already said, and never with an
answer that was incomplete), and a task scored again replaces its record. A run made with other settings (task
set, reports, references, scorers, judge) is refused. The run ends by the one ending rule
(:mod:`rubricforge.jobs.base`): ``complete`` only when every reported task has every metric, else
``incomplete: <n> of <m> tasks unscored`` (the CLI exits 1: re-run to retry them) or ``stopped: <why>``.

With an agent (``rubricforge eval --agent``; :mod:`rubricforge.evaluation.agents`) the reports are made first:
the agent answers each task that has no report yet in ``reports.jsonl`` (``{"key", "id", "response",
"tool_calls", "agent_calls"}``, appended as each is done; a task whose agent call failed gets none and is
tried again by the next run), then the reports are scored as above. The expected calls, tokens and dollars
are announced before the first call, and a priced estimate over ``llm.max_cost_usd`` stops the run first.

A preset (``eval.preset``, ``--preset``: :mod:`rubricforge.evaluation.presets`) fills the judge, scorers and
settings the user did not set; the summary's ``leaderboard`` says whether the run's numbers are the leaderboard's
(the preset's exact evaluator) or ``not comparable with the leaderboard`` and why, and so does its summary line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.evaluation import report as html
from rubricforge.evaluation import presets, scorers, stats
from rubricforge.evaluation.citations import summarise_citations
from rubricforge.evaluation.tasks import digest, load_reports, load_tasks, report_text, scorers_for
from rubricforge.jobs.base import JobResult, job_result
from rubricforge.jobs.items import ItemJob, ItemStats
from rubricforge.io.files import atomic_write_json, atomic_write_text
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir, job_kind

if TYPE_CHECKING:
    from rubricforge.evaluation.agents import AgentConfig, Runner
    from rubricforge.llm import LLMClient

JOB_KIND = "eval"
LOG = "tasks"
REPORTS = "reports"  # the agent's reports, when it runs


@dataclass
class EvalSummary:
    run_dir: str
    status: str
    tasks: int  # in the task set
    reports: int  # tasks with a report
    missing: int  # tasks without one (not scored)
    scored_now: int  # tasks that got every metric in this invocation
    scored: int  # tasks with every metric (this invocation or an earlier one)
    judge_model: str
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    judge: dict[str, Any] = field(default_factory=dict)
    agent: dict[str, Any] = field(default_factory=dict)  # with --agent: model, reports made now, calls per task
    rejects: dict[str, Any] = field(default_factory=dict)
    report: str = ""
    leaderboard: dict[str, Any] = field(default_factory=dict)  # presets.label: comparable with a leaderboard, or why not

    def lines(self) -> list[str]:
        a = self.agent
        agent = [f"agent {a['model']} ({a['episode']}): {a['made_now']} reports made now, {a['calls_per_task']:.1f} "
                 f"calls and {a['tool_calls_per_task']:.1f} tool calls per task"] if a else []
        why = "; ".join(f"{n} {r}" for r, n in self.rejects.get("by_reason", {}).items())
        rejects = [f"skipped {self.rejects['total']} report lines ({why}): {self.rejects['file']}"] \
            if self.rejects.get("total") else []
        unscored = f", {self.reports - self.scored} unscored" if self.scored < self.reports else ""
        missing = f", {self.missing} without a report" if self.missing else ""
        label = presets.line(self.leaderboard)
        return [*agent, f"{self.status.split(':', 1)[0]}: {self.scored} of {self.tasks} tasks scored ({self.scored_now} "
                        f"now{unscored}{missing}); judge {self.judge_model}" + (f"; {label}" if label else ""),
                *rejects, f"report: {self.report}"]


def evaluate(cfg: Config, tasks_path: str | Path, reports_path: str | Path | None, run_dir: str | Path,
             references: str | Path | None = None, asked: Sequence[str] = (), resamples: int = stats.RESAMPLES,
             seed: int = 0, progress: bool = True, agent: AgentConfig | None = None, split: str | None = None,
             limit: int | None = None, announce: Callable[[str], None] | None = None,
             sampler: Callable[[str, Config], Any] | None = None) -> JobResult:
    """Score ``reports_path`` — or what ``agent`` writes — on ``tasks_path`` (its ``split``, its first ``limit``
    tasks) into ``run_dir`` (see the module docstring); ``announce`` hears the agent's budget line first;
    ``sampler`` loads a checkpoint agent (:class:`~rubricforge.evaluation.agents.Runner`). The payload:
    :class:`EvalSummary`."""
    cfg = presets.apply(cfg)
    if not asked and cfg.eval.preset is not None:
        asked = presets.PRESETS[cfg.eval.preset].scorers
    outside: set[str] = set()  # tasks the split / limit left out: their report lines are not rejects
    tasks = load_tasks(tasks_path, split, limit, outside)
    run = RunDir(run_dir, JOB_KIND)
    new_dirs = [d for d in (run.path, *run.path.parents) if not d.exists()]  # deepest first
    runner: Runner | None = None
    try:
        with Rejects(run / "rejects.jsonl") as rejects:
            reports = load_reports(reports_path, tasks, rejects, outside) if reports_path else dict.fromkeys(tasks, "")
            refs = load_reports(references, tasks, rejects, outside) if references else {}
            names = {tid: scorers_for(tasks[tid], asked) for tid in reports}
            if any("citation" in n for n in names.values()):  # a missing corpus index is bad input: no run started
                from rubricforge.corpora.index_store import CorpusIndex

                CorpusIndex.from_config(cfg).close()
            if references and (lacking := [tid for tid in reports if tid not in refs]):
                raise UserError(f"references file {references} has no reference report for task {lacking[0]!r} "
                                f"({len(lacking)} tasks lack one)", "give one for every reported task, or no --references")
            if agent is not None:
                runner = _agent_runner(cfg, agent, tasks, names, announce, sampler)
    except BaseException:
        for folder in new_dirs:  # no empty run directory left by a bad input
            folder.rmdir()
        raise
    refs = {tid: refs.get(tid) or str(tasks[tid].get("reference_report") or "") for tid in reports}
    judge_model = cfg.llm.role("judge").model
    settings = {"tasks": str(Path(tasks_path).resolve()),
                "reports": str(Path(reports_path).resolve()) if reports_path else None,
                **({"agent": agent.settings()} if agent else {}),
                "references": str(Path(references).resolve()) if references else None,
                "scorers": list(asked) or "auto", "judge": judge_model, "judge_mode": cfg.reward.judge_mode,
                **_eval_settings(cfg)}
    run.check_kind()
    log: StageLog[Any] = run.log(LOG)
    run.check_settings("settings", settings, len(log) > 0 or len(run.log(REPORTS)) > 0, "scores")

    job = _EvalJob(cfg, run, settings, tasks, reports, refs, names, log)
    made: dict[str, Any] = {}
    made_now, status = 0, "complete"
    if runner is not None and agent is not None:
        made, made_now, status = _run_agent(cfg, agent, runner, run, job.invocation, tasks, progress)
        reports = {tid: report_text(made[tid]["response"]) for tid in tasks if tid in made}
    job.set_reports(reports)
    pending = job.pending(list(reports))
    scoring = asyncio.run(job.arun(list(reports), progress)).status
    status = scoring if status == "complete" else status  # a budget stop while the agent ran is the run's status
    per_task = {tid: log[tid]["metrics"] for tid in reports if tid in log}
    scored = {tid for tid in reports if job.finished(log.get(tid))}
    metrics = stats.summarise(per_task, resamples, seed) | summarise_citations((log[t] for t in per_task), resamples, seed)
    metrics |= scorers.healthbench_summary(metrics)
    used = list(dict.fromkeys(n for t in reports for n in names[t]))
    modes = sorted({log[t]["scores"]["race"].get("mode") for t in per_task if "race" in log[t].get("scores", {})})
    summary = EvalSummary(str(run.path), status, len(tasks), len(reports), len(tasks) - len(reports),
                          len(scored.intersection(pending)), len(scored), judge_model, metrics,
                          _judge_use(run, [log[t] for t in per_task]),
                          _agent_use(run, agent, made, made_now) if agent else {}, rejects.summary(), str(run / "report.html"),
                          presets.label(cfg, used, modes))
    atomic_write_json(run / "summary.json", asdict(summary))
    questions = {tid: str(tasks[tid].get("question") or tasks[tid].get("prompt") or "") for tid in per_task}
    atomic_write_text(run / "report.html", html.run_page(asdict(summary), per_task, questions))
    return job_result(summary, run / "report.html", run)


def _eval_settings(cfg: Config) -> dict[str, Any]:
    """The run's ``eval`` settings that are not at their defaults, and the FACT judge when it is not the judge (left
    out at the defaults, so a run made before they existed resumes)."""
    default = type(cfg.eval)()
    out = {k: v for k, v in cfg.eval.model_dump().items() if v != getattr(default, k)}
    if cfg.eval.fact_role != "judge":
        out["fact_judge"] = cfg.llm.role(cfg.eval.fact_role).model
    return {"eval": out} if out else {}


def _agent_runner(cfg: Config, agent: AgentConfig, tasks: dict[str, dict[str, Any]],
                  names: dict[str, tuple[str, ...]], announce: Callable[[str], None] | None,
                  sampler: Callable[[str, Config], Any] | None) -> Runner:
    """The agent's tools and model opened (a missing index is bad input), then its budget announced and checked."""
    from rubricforge.evaluation.agents import Runner, estimate

    runner = Runner(agent, cfg, sampler)
    try:
        cost = estimate(agent, cfg, list(tasks.values()), [names[t] for t in tasks])
        if announce is not None:
            announce(cost.line())
        cost.check(cfg.llm.max_cost_usd)
    except BaseException:
        runner.close()
        raise
    return runner


def _run_agent(cfg: Config, agent: AgentConfig, runner: Runner, run: RunDir, invocation: str,
               tasks: dict[str, dict[str, Any]], progress: bool) -> tuple[dict[str, Any], int, str]:
    """The agent's records by task id, after it answered the tasks that have none; how many it made now; and
    how it ended (a budget stop keeps what it made). Its ledger joins the scoring job's ``invocation``."""
    log: StageLog[Any] = run.log(REPORTS)
    job = _AgentJob(cfg, agent, runner, run, invocation, tasks, log)
    try:
        done = asyncio.run(job.arun(list(tasks), progress))
    finally:
        runner.close()
    return {tid: log[tid] for tid in tasks if tid in log}, done.done_now, done.status


class _AgentJob(ItemJob[str]):
    """One task id per item: the agent's episode on the task's question (a failed model call records nothing).
    The run's manifest is the scoring job's; this job adds its ledger to the run (``agent`` stage)."""

    stage = "agent"
    undone_label = "tasks without a report (their agent call failed)"

    def __init__(self, cfg: Config, agent: AgentConfig, runner: Runner, run: RunDir, invocation: str,
                 tasks: dict[str, dict[str, Any]], log: StageLog[Any]):
        from rubricforge.evaluation.agents import ROLE

        super().__init__(log, cfg.llm.model_copy(update={ROLE: agent.role()}), agent.concurrency)
        self.runner, self.out, self.ledger, self.tasks = runner, run, invocation, tasks

    def key(self, item: str) -> str:
        return item

    def open(self, client: LLMClient) -> None:
        self.client = client

    def close(self) -> None:
        atomic_write_json(self.out.ledger_path(self.ledger, "agent"), {"ledger": self.client.ledger.summary()})

    async def process(self, item: str) -> dict[str, Any] | None:
        task = self.tasks[item]
        got = await self.runner.answer(self.client, str(task.get("question") or task.get("prompt") or ""))
        return None if got is None else {"id": item, **got}


def _agent_use(run: RunDir, agent: AgentConfig, made: dict[str, Any], made_now: int) -> dict[str, Any]:
    """The agent's model, episode, reports (all, made now), and its calls, tool calls and tokens per report."""
    from rubricforge.evaluation.agents import STAGE

    n = len(made) or 1
    tokens = run.manifest().get("ledger", {}).get("by_stage", {}).get(STAGE, {})
    return {"model": agent.model, "episode": agent.episode(), "reports": len(made), "made_now": made_now,
            "calls_per_task": sum(r["agent_calls"] for r in made.values()) / n,
            "tool_calls_per_task": sum(r["tool_calls"] for r in made.values()) / n,
            "tokens_per_task": {k: tokens.get(k, 0) / n for k in ("prompt_tokens", "completion_tokens")}}


class _EvalJob(ItemJob[str]):
    """One task id per item; a record is finished when it scored this report (and reference) with these
    scorers and has every metric. Its manifest (the base's) holds the run's settings, which guard a resume."""

    stage = "scoring"
    roles: tuple[str, ...] = ("judge",)
    undone_label = "tasks unscored"

    def __init__(self, cfg: Config, run: RunDir, run_settings: dict[str, Any], tasks: dict[str, dict[str, Any]],
                 reports: dict[str, str], refs: dict[str, str], names: dict[str, tuple[str, ...]], log: StageLog[Any]):
        super().__init__(log, cfg.llm, cfg.reward.concurrency, run, cfg)
        self.cfg, self.run_settings, self.tasks, self.refs, self.names = cfg, run_settings, tasks, refs, names
        if any("citation" in n for n in names.values()):  # the FACT judge's role is checked before any work too
            self.roles = tuple(dict.fromkeys(("judge", cfg.eval.fact_role)))
        self.set_reports(reports)
        self.index: Any = None
        self.resolve: Any = None

    def set_reports(self, reports: dict[str, str]) -> None:
        """The reports to score (and each one's digest with its reference, which says whether a record is current)."""
        self.reports = reports
        self.shas = {tid: digest(reports[tid] + "\0" + self.refs[tid]) for tid in reports}

    def key(self, item: str) -> str:
        return item

    def finished(self, record: dict[str, Any] | None) -> bool:
        return (record is not None and record.get("report_sha") == self.shas[record["key"]]
                and record.get("scorers") == list(self.names[record["key"]])
                and all(v is not None for v in record["metrics"].values()))

    def manifest_fields(self, client: LLMClient) -> dict[str, Any]:
        return {"settings": self.run_settings}

    def counts(self, stats: ItemStats) -> dict[str, Any]:
        return {"tasks": len(self.tasks), "reports": len(self.reports),
                "scored": sum(1 for t in self.reports if self.finished(self.log.get(t)))}

    def open(self, client: LLMClient) -> None:
        self.client = client
        if any("citation" in n for n in self.names.values()):  # cited ids resolve against the corpus index
            from rubricforge.corpora.index_store import CorpusIndex
            from rubricforge.evaluation.citations import CorpusCitations

            self.index = CorpusIndex.from_config(self.cfg)
            self.resolve = CorpusCitations(self.index)

    def close(self) -> None:
        if self.index is not None:
            self.index.close()

    async def process(self, item: str) -> dict[str, Any]:
        from rubricforge.rewards.judging import Judge

        judge = Judge(self.client)  # one per task: its calls are the task's
        fact_judge = judge if self.cfg.eval.fact_role == "judge" else Judge(self.client, self.cfg.eval.fact_role)
        names = self.names[item]
        got = await asyncio.gather(*(scorers.score(n, judge, self.tasks[item], self.reports[item],
                                                   self.refs[item] or None, self.cfg.reward.judge_mode,
                                                   self.resolve, self.cfg.eval, fact_judge)
                                     for n in names))
        calls = judge.calls + fact_judge.calls if fact_judge is not judge else judge.calls
        return {"id": item, "report_sha": self.shas[item], "scorers": list(names),
                "scores": dict(zip(names, got, strict=True)),
                "metrics": {m: v for s in got for m, v in s["metrics"].items()}, "judge_calls": dict(calls)}


def _judge_use(run: RunDir, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Judge calls per scored task by stage (from the records) and the run's tokens by stage (all invocations)."""
    calls: dict[str, int] = {}
    for record in records:
        for stage, n in record.get("judge_calls", {}).items():
            calls[stage] = calls.get(stage, 0) + n
    by_stage = {s: v for s, v in run.manifest().get("ledger", {}).get("by_stage", {}).items() if s != "agent"}
    return {"calls_per_task": {s: n / len(records) for s, n in calls.items()} if records else {},
            "tokens_by_stage": {s: {k: by_stage[s].get(k, 0) for k in ("requests", "prompt_tokens",
                                                                     "completion_tokens")} for s in by_stage}}


# ---------------------------------------------------------------- compare


JUDGE_FREE = ("exact", "format")  # scorers that make no judge call


def read_run(path: str | Path) -> dict[str, dict[str, float | None]]:
    """An evaluation run's per-task metrics; a UserError when ``path`` is not one."""
    return {k: r["metrics"] for k, r in _records(path).items()}


def _records(path: str | Path) -> dict[str, dict[str, Any]]:
    run = RunDir(path, JOB_KIND)
    if not (run / f"{LOG}.jsonl").is_file() or job_kind(run.manifest()) != JOB_KIND:
        raise UserError(f"{path} is not an evaluation run directory (no tasks.jsonl / manifest)",
                        "pass folders written by `rubricforge eval --reports ... --run-dir ...`")
    log: StageLog[Any] = run.log(LOG)
    fix = "pass folders written by `rubricforge eval`, or re-run it into this one to rewrite its tasks.jsonl"
    if not len(log):
        raise UserError(f"{run / f'{LOG}.jsonl'} holds no task record (it is empty or not JSON lines)", fix)
    for key in log.keys():
        metrics = log[key].get("metrics")
        if not isinstance(metrics, dict) or not all(v is None or isinstance(v, (int, float)) for v in metrics.values()):
            raise UserError(f"{run / f'{LOG}.jsonl'} record {key!r} has no 'metrics' object of numbers", fix)
    return {k: log[k] for k in log.keys()}


def scoring(path: str | Path, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What makes a run's numbers comparable with another's: its scorers, its judge and judge mode (when a scorer
    asks one) and its RACE modes (reference-relative or pointwise), over ``records``."""
    settings = RunDir(path, JOB_KIND).manifest().get("settings", {})
    names = sorted({n for r in records.values() for n in r.get("scorers", [])})
    judged = any(n not in JUDGE_FREE for n in names)
    own = {"race_prompt": "minddr", "rubrics_per_call": 50, "fact_judge": settings.get("judge"),
           "fact_prompt": "rubricforge", **settings.get("eval", {})}  # recorded only when not at the defaults
    return {"scorers": names, "judge": settings.get("judge") if judged else None,
            "judge mode": settings.get("judge_mode") if "rubric" in names else None,
            "RACE prompt": own["race_prompt"] if "race" in names else None,
            "FACT judge": f"{own['fact_judge']} ({own['fact_prompt']} prompt)" if "citation" in names else None,
            "rubrics per call": own["rubrics_per_call"] if "drb2" in names else None,
            "RACE mode": sorted({r["scores"]["race"].get("mode") for r in records.values() if "race" in r.get("scores", {})})}


def _leaderboard(path: str | Path) -> dict[str, Any]:
    """A run's :func:`~rubricforge.evaluation.presets.label`, from its summary ({} for a run made before labels)."""
    summary = Path(path) / "summary.json"
    try:
        return dict(json.loads(summary.read_text(encoding="utf-8")).get("leaderboard") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def compare(run_a: str | Path, run_b: str | Path, out: str | Path | None = None, resamples: int = stats.RESAMPLES,
            seed: int = 0) -> dict[str, Any]:
    """Per metric both runs have, :func:`~rubricforge.evaluation.stats.paired` over the tasks both scored;
    written to ``out`` (default ``<run_b>/compare-<run_a name>``) as ``compare.json`` and ``compare.html``.
    Runs scored with other scorers, judges or RACE modes (on the shared tasks) are refused: their numbers
    differ by the scoring, not by the reports."""
    rec_a, rec_b = _records(run_a), _records(run_b)
    a, b = {k: r["metrics"] for k, r in rec_a.items()}, {k: r["metrics"] for k, r in rec_b.items()}
    names = [m for m in dict.fromkeys(m for v in a.values() for m in v) if any(m in v for v in b.values())]
    if not names or not set(a) & set(b):
        raise UserError(f"{run_a} and {run_b} share no scored task and metric", "compare runs on the same task set")
    shared = set(a) & set(b)
    how_a = scoring(run_a, {t: rec_a[t] for t in shared})
    how_b = scoring(run_b, {t: rec_b[t] for t in shared})
    if differ := [k for k in how_a if how_a[k] != how_b[k]]:
        raise UserError(f"{run_a} and {run_b} were scored differently ("
                        + "; ".join(f"{k}: {how_a[k]} vs {how_b[k]}" for k in differ) + ")",
                        "score both with the same scorers, judge and references (a new --run-dir)")
    metrics = {m: stats.paired({t: v.get(m) for t, v in a.items()}, {t: v.get(m) for t, v in b.items()},
                               resamples, seed) for m in names}
    folder = Path(out) if out else Path(run_b) / f"compare-{Path(run_a).resolve().name}"
    result = {"run_a": str(run_a), "run_b": str(run_b), "out": str(folder), "metrics": metrics,
              "leaderboard": {"A": _leaderboard(run_a), "B": _leaderboard(run_b)}}
    atomic_write_json(folder / "compare.json", result)
    atomic_write_text(folder / "compare.html", html.compare_page(result))
    return result
