"""`rubricforge reward score`: every response of a JSONL scored against its example, resumably.

Each scored response is appended at once to the output JSONL (``{"key": "<id>#<line>", "id", "line",
"rewards": {name: {"value", ...details}}}``), so an interrupted run keeps what it finished; the same
command then scores only responses that are missing, or that have an unscored reward (a judge that was
down is asked again; the LLM cache answers everything it already said). The summary (mean, min, max,
scored and unscored per reward, judge calls) goes to ``<out>.summary.json``. A responses file of which no
line names a dataset example is a UserError; a run in which no reward could be computed at all (every
judge call failed) raises RunFailed after writing the summary, so a script sees a non-zero exit.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import RunFailed, UserError
from rubricforge.rundir import StageBar
from rubricforge.corpora.rejects import Rejects
from rubricforge.export.convert import to_rubricforge_rows
from rubricforge.rewards.inputs import Response, load_examples, load_responses
from rubricforge.rewards.scorer import RewardScorer, Rollout, check_columns
from rubricforge.rundir import StageLog, atomic_write_json


@dataclass
class ScoreSummary:
    out: str
    responses: int
    scored_now: int
    rewards: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> mean/min/max/scored/unscored
    rejects: dict[str, Any] = field(default_factory=dict)
    judge: dict[str, dict[str, int]] = field(default_factory=dict)
    no_known_tags: int = 0  # responses with none of the known tags (DeepRubric's or DR Tulu's): no answer found


def default_out(responses: str | Path) -> Path:
    responses = Path(responses)
    return responses.with_name(f"{responses.stem}.scores.jsonl")


def score_responses(cfg: Config, dataset: str | Path, responses: str | Path, names: Sequence[str],
                    out: str | Path | None = None, progress: bool = True) -> ScoreSummary:
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
    check_columns([examples[r.example_id] for r in todo], names, dataset)
    log: StageLog[Any] = StageLog(out or default_out(responses))
    pending = [r for r in todo if not _finished(log.get(r.key), names)]
    judge_counts = asyncio.run(_score_all(cfg, examples, pending, tuple(names), log, progress))
    untagged = sum(1 for r in todo if (log.get(r.key) or {}).get("protocol", "") is None)
    summary = ScoreSummary(str(log.path), len(todo), len(pending), _stats(log, todo, names), rejects.summary(),
                           judge_counts, untagged)
    summary_path = log.path.with_name(f"{log.path.stem}.summary.json")
    atomic_write_json(summary_path, vars(summary))
    if not any(s["scored"] for s in summary.rewards.values()):
        raise RunFailed(f"no reward could be computed for any of the {len(todo)} responses (every judge call "
                        f"failed?): see {summary_path}; re-run the same command to retry them")
    return summary


def _finished(record: dict[str, Any] | None, names: Sequence[str]) -> bool:
    return record is not None and all(record["rewards"].get(n, {}).get("value") is not None for n in names)


async def _score_all(cfg: Config, examples: dict[str, dict[str, Any]], pending: list[Response],
                     names: tuple[str, ...], log: StageLog, progress: bool) -> dict[str, dict[str, int]]:
    from rubricforge.llm import LLMClient

    client = LLMClient(cfg.llm)
    scorer = RewardScorer(cfg, client)
    slots = asyncio.Semaphore(cfg.reward.concurrency)

    async def one(response: Response, advance: Callable[[int], None]) -> None:
        async with slots:
            got = await scorer.score(Rollout(examples[response.example_id], response.completion, response.snippets),
                                     names)
        log.append(response.key, {"id": response.example_id, "line": response.line, "rewards": got,
                                  "protocol": scorer.protocol(Rollout(examples[response.example_id],
                                                                      response.completion))})
        advance(1)

    try:
        with StageBar(progress) as bar:
            advance = bar.task("scoring", total=len(pending))
            await asyncio.gather(*(one(r, advance) for r in pending))
    finally:
        await client.aclose()
    return scorer.judge.counts()


def _stats(log: StageLog, todo: list[Response], names: Sequence[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for name in names:
        values = [(log.get(r.key) or {}).get("rewards", {}).get(name, {}).get("value") for r in todo]
        scored = [v for v in values if v is not None]
        out[name] = {"mean": statistics.fmean(scored) if scored else None, "min": min(scored, default=None),
                     "max": max(scored, default=None), "scored": len(scored), "unscored": len(values) - len(scored)}
    return out
