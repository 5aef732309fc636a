"""`rubricforge reward score`: every response of a JSONL scored against its example, resumably.

Each scored response is appended at once to the output JSONL (``{"key": "<id>#<line>", "id", "line",
"rewards": {name: {"value", ...details}}}``), so an interrupted run keeps what it finished; the same
command then scores only responses that are missing, or that have an unscored reward (a judge that was
down is asked again; the LLM cache answers everything it already said), each replacing its old record. The
summary (mean, min, max,
scored and unscored per reward, judge calls, status) goes to ``<out>.summary.json``; the run's record
(``manifest.json`` with the rewards, inputs, judge model, counts and LLM ledger; ``config.yaml``) to the run
directory ``<out>.run/`` (:class:`~rubricforge.rundir.RunDir`). A responses file of
which no line names a dataset example is a UserError. By the one ending rule (:mod:`rubricforge.jobs.base`) a run
with a response left unscored ends ``incomplete: <n> of <m> responses unscored`` (the CLI exits 1: re-run to retry
them) and a budget stop ``stopped: <why>``, each with the summary of what is scored.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.io.rejects import Rejects
from rubricforge.export.convert import to_rubricforge_rows
from rubricforge.jobs.base import JobResult, job_result
from rubricforge.jobs.items import ItemJob
from rubricforge.io.datasets import load_examples
from rubricforge.rewards.responses import Response, load_responses
from rubricforge.rewards.scorer import RewardScorer, Rollout, check_columns, check_rubrics
from rubricforge.io.files import atomic_write_json
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient


@dataclass
class RewardScoreSummary:
    out: str
    responses: int
    scored_now: int
    rewards: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> mean/min/max/scored/unscored
    rejects: dict[str, Any] = field(default_factory=dict)
    judge: dict[str, dict[str, int]] = field(default_factory=dict)
    no_known_tags: int = 0  # responses with none of the known tags (DeepRubric's or DR Tulu's): no answer found
    status: str = "complete"  # or "stopped: <why>" (a budget stop: the summary covers what is scored)

    def lines(self) -> list[str]:
        return [f"{self.responses} responses ({self.scored_now} scored now) -> {self.out}"]

    @property
    def warnings(self) -> list[str]:
        return [*([f"skipped {self.rejects['total']} bad lines: {self.rejects['file']}"] if self.rejects.get("total")
                  else []),
                *([f"{self.no_known_tags} responses hold no known tags (<think>, <answer>, <tool_call>/"
                   "<tool_response> or DR Tulu's <call_tool>/<tool_output>): no answer was found, so their "
                   "answer-based rewards are 0"] if self.no_known_tags else [])]


def default_out(responses: str | Path) -> Path:
    responses = Path(responses)
    return responses.with_name(f"{responses.stem}.scores.jsonl")


def score_responses(cfg: Config, dataset: str | Path, responses: str | Path, names: Sequence[str],
                    out: str | Path | None = None, progress: bool = True) -> JobResult:
    """Score every response of ``responses`` against its example of ``dataset`` with the rewards ``names``
    (the payload: :class:`RewardScoreSummary`)."""
    for name in names:
        RewardScorer.check_name(name)
    examples = load_examples(dataset, adapt=to_rubricforge_rows)
    with Rejects(Path(responses).with_name(f"{Path(responses).stem}.rejects.jsonl")) as rejects:
        todo = load_responses(responses, examples, rejects)
    if not todo:
        why = (f"all {rejects.total} lines were rejected (first reason: {next(iter(rejects.by_reason))}; all in "
               f"{rejects.path})" if rejects.total else "it holds no responses")
        raise UserError(f"nothing to score in {responses}: {why}",
                        f'give each line the "id" of an example in {dataset} and a "response"')
    rows = [examples[i] for i in dict.fromkeys(r.example_id for r in todo)]
    check_rubrics(rows, names, dataset)  # a bad rubric set, before any judge call
    check_columns(rows, names, dataset)
    log: StageLog[Any] = StageLog(out or default_out(responses))
    run = RunDir(log.path.with_name(f"{log.path.stem}.run"), "reward-score")
    job = _RewardScoreJob(cfg, examples, tuple(names), log, run)
    job.inputs = {"dataset": str(Path(dataset).resolve()), "responses": str(Path(responses).resolve())}
    stats = asyncio.run(job.arun(todo, progress))
    untagged = sum(1 for r in todo if (log.get(r.key) or {}).get("protocol", "") is None)
    summary = RewardScoreSummary(str(log.path), len(todo), stats.done_now, _stats(log, todo, names), rejects.summary(),
                                 job.judge_counts(), untagged, stats.status)
    summary_path = log.path.with_name(f"{log.path.stem}.summary.json")
    atomic_write_json(summary_path, vars(summary))
    return job_result(summary, summary.out, run)


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


K = TypeVar("K", bound=Keyed)


class RewardItemJob(ItemJob[K]):
    """An item job that scores rollouts with the rewards ``names`` (one :class:`RewardScorer` on the job's client);
    a record is finished when every asked reward has a value. `reward score` and `reward probe` are two."""

    def __init__(self, cfg: Config, names: tuple[str, ...], log: StageLog[Any], run: RunDir):
        super().__init__(log, cfg.llm, cfg.reward.concurrency, run, cfg)
        self.cfg, self.names = cfg, names
        self.scorer: RewardScorer | None = None
        self.inputs: dict[str, str] = {}

    def key(self, item: K) -> str:
        return item.key

    def finished(self, record: dict[str, Any] | None) -> bool:
        return record is not None and all(record["rewards"].get(n, {}).get("value") is not None for n in self.names)

    def open(self, client: LLMClient) -> None:
        self.scorer = RewardScorer(self.cfg, client)

    def judge_counts(self) -> dict[str, dict[str, int]]:
        return self.scorer.judge.counts() if self.scorer is not None else {}


class _RewardScoreJob(RewardItemJob[Response]):
    """One response per item, keyed ``<id>#<line>``."""

    stage = "scoring"
    roles = ("judge",)
    undone_label = "responses unscored"

    def __init__(self, cfg: Config, examples: dict[str, dict[str, Any]], names: tuple[str, ...], log: StageLog[Any],
                 run: RunDir):
        super().__init__(cfg, names, log, run)
        self.examples = examples

    def manifest_fields(self, client: LLMClient) -> dict[str, Any]:
        return {"rewards": list(self.names), **self.inputs, "models": {"judge": client.model_name("judge")},
                "judge_mode": self.cfg.reward.judge_mode}

    async def process(self, item: Response) -> dict[str, Any]:
        assert self.scorer is not None
        rollout = Rollout(self.examples[item.example_id], item.completion, item.snippets)
        got = await self.scorer.score(rollout, self.names)
        return {"id": item.example_id, "line": item.line, "rewards": got,
                "protocol": self.scorer.protocol(Rollout(self.examples[item.example_id], item.completion))}


def _stats(log: StageLog, todo: list[Response], names: Sequence[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for name in names:
        values = [(log.get(r.key) or {}).get("rewards", {}).get(name, {}).get("value") for r in todo]
        scored = [v for v in values if v is not None]
        out[name] = {"mean": statistics.fmean(scored) if scored else None, "min": min(scored, default=None),
                     "max": max(scored, default=None), "scored": len(scored), "unscored": len(values) - len(scored)}
    return out
