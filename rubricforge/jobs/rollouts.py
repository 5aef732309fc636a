"""`rubricforge rollouts sample`: run a model with the tools over dataset questions, write trajectories.

Each question is answered ``train.rollouts_per_prompt`` times with the same prompt, tools and environment
as GRPO training (the App. D system prompt, the tool schemas rendered by the chat template, one
:class:`~rubricforge.agent.environment.ResearchEnvironment` per trajectory, at most
``train.max_tool_turns`` tool turns, tool calls parsed with TRL's response parser; the episode is
:func:`rubricforge.agent.react.run_episode`; the model is the caller's, e.g. the CLI's
:class:`~rubricforge.training.rollouts.Sampler`).
It runs on the item-job base (:class:`~rubricforge.jobs.items.ItemJob`): one item per (question, sample),
keyed ``<id>#<k>``, one JSONL line per trajectory appended as soon as it is done (a re-run skips finished
ones and loads no model when none is left); the run's record (``manifest.json``: the inputs, the workflow,
each invocation's status, counts and LLM ledger; ``config.yaml``) goes to the run directory ``<out>.run/``::

    {"key": "<id>#<k>", "id", "sample": k, "response": [<assistant/tool messages>], "messages": [<prompt +
     response>], "tools": "<JSON tool schemas>", "snippets": [<Snippet>, ...]}

``response`` + ``snippets`` is what ``rubricforge reward score`` reads (reward audits, ``train dpo-pairs``);
``messages`` + ``tools`` is what ``rubricforge train sft`` reads.

``workflow="mams"`` runs Prefs' MaMs workflow (:mod:`rubricforge.agent.mams`) with the same tools
instead: ``response`` is ``<answer>`` + the final report, ``calls`` every policy call of the episode
(role, messages, completion) and ``workflow`` "mams".
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rubricforge.agent.rows import training_rows
from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.jobs.base import JobResult, job_result
from rubricforge.jobs.items import ItemJob, ItemStats
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir

if TYPE_CHECKING:
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.llm import LLMClient

WORKFLOWS = ("react", "mams")


@dataclass
class SampleSummary:
    out: str
    trajectories: int
    sampled_now: int
    tool_calls: int
    status: str = "complete"

    def lines(self) -> list[str]:
        return [f"{self.trajectories} trajectories ({self.sampled_now} sampled now, {self.tool_calls} tool calls) -> "
                f"{self.out}"]


def sample_rollouts(cfg: Config, dataset: str | Path, out: str | Path, sampler: Callable[[], Any],
                    limit: int | None = None, progress: bool = False, workflow: str = "react") -> JobResult:
    """Trajectories for the first ``limit`` questions of ``dataset``, appended to ``out``. ``sampler()`` makes the
    model (``turn(messages, tools)``, and ``text(messages)`` for MaMs); it is called only when a question is left.
    The payload: :class:`SampleSummary`."""
    if workflow not in WORKFLOWS:
        raise UserError(f"unknown workflow '{workflow}'", "use react (App. D agent) or mams (Prefs MaMs)")
    rows = training_rows(dataset, [])[:limit]
    log: StageLog[Any] = StageLog(out)
    run = RunDir(log.path.with_name(f"{log.path.stem}.run"), "rollouts")
    job = _RolloutJob(cfg, log, sampler, workflow, run)
    job.inputs = {"dataset": str(Path(dataset).resolve()), "out": str(log.path.resolve()), "limit": limit}
    items = [(row, k) for row in rows for k in range(cfg.train.rollouts_per_prompt)]
    if job.pending(items):  # before the progress bar: a model or index that cannot load is one line, no bar
        job.load()
    stats = asyncio.run(job.arun(items, progress))
    summary = SampleSummary(str(job.log.path), len(job.log), stats.done_now, job.tool_calls, stats.status)
    return job_result(summary, summary.out, run)


class _RolloutJob(ItemJob[tuple[dict[str, Any], int]]):
    """One (question row, sample index) per item; one trajectory at a time (one model on one device). The
    model and the tools are loaded (:meth:`load`) only when items are left."""

    stage = "sampling"

    def __init__(self, cfg: Config, log: StageLog[Any], make_sampler: Callable[[], Any], workflow: str, run: RunDir):
        super().__init__(log, cfg.llm, concurrency=1, run=run, cfg=cfg)
        self.cfg, self.make_sampler, self.workflow = cfg, make_sampler, workflow
        self.inputs: dict[str, Any] = {}
        self.sampler: Any = None
        self.toolbox: ToolBox | None = None
        self.tool_calls = 0

    def key(self, item: tuple[dict[str, Any], int]) -> str:
        return f"{item[0]['id']}#{item[1]}"

    def manifest_fields(self, client: LLMClient) -> dict[str, Any]:
        t = self.cfg.train
        return {**self.inputs, "workflow": self.workflow, "rollouts_per_prompt": t.rollouts_per_prompt,
                "max_tool_turns": t.max_tool_turns}

    def counts(self, stats: ItemStats) -> dict[str, Any]:
        return {**super().counts(stats), "trajectories": len(self.log), "tool_calls_now": self.tool_calls}

    def load(self) -> None:
        from rubricforge.corpora.tools import ToolBox

        self.sampler = self.make_sampler()
        self.toolbox = ToolBox.from_config(self.cfg)

    def close(self) -> None:
        if self.toolbox is not None:
            self.toolbox.close()

    async def process(self, item: tuple[dict[str, Any], int]) -> dict[str, Any]:
        return await asyncio.to_thread(self._episode, *item)

    def _episode(self, row: dict[str, Any], k: int) -> dict[str, Any]:
        from rubricforge.agent.environment import ResearchEnvironment

        assert self.toolbox is not None, "load() runs before the items"
        env = ResearchEnvironment(self.toolbox)
        env.reset(**row)
        snippets = lambda: [s.model_dump(mode="json") for s in env.snippets]  # noqa: E731
        if self.workflow == "mams":
            from rubricforge.agent.mams import run_mams

            episode = run_mams(self.sampler.text, env.toolbox.call, str(row["question"]))
            self.tool_calls += episode.tool_calls
            return {"id": row["id"], "sample": k, "workflow": "mams", "response": f"<answer>{episode.report}</answer>",
                    "calls": episode.calls, "snippets": snippets()}
        from rubricforge.agent.react import run_episode
        from rubricforge.extras import needs

        with needs("train"):
            from transformers.utils import get_json_schema

        response = run_episode(self.sampler, env, row["prompt"], self.cfg.train.max_tool_turns)
        self.tool_calls += sum(len(m.get("tool_calls") or []) for m in response)
        return {"id": row["id"], "sample": k, "response": response, "messages": [*row["prompt"], *response],
                "tools": json.dumps([get_json_schema(t) for t in (env.search, env.browse, env.scholar)]),
                "snippets": snippets()}
