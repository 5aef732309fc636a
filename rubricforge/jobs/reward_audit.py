"""`rubricforge judge agreement` on the item-job base: each response judged ``repeats`` times by the judge, once by
a second judge and once in the batched mode (:func:`rubricforge.rewards.audit.audit_response`), its record
appended as soon as it is made to ``audit.jsonl`` in the run directory ``<responses>.audit.run/`` (keyed by
response; a re-run judges only the responses left, and refuses other judges or repeats), with the run's record
there too (``manifest.json``: inputs, models, status, counts, LLM ledger; ``config.yaml``). The report
(:class:`~rubricforge.rewards.audit.AuditReport`) is summarised from every record and written as JSON to
``out`` (default ``<run dir>/report.json``); its unscored judge calls are this invocation's.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.io.rejects import Rejects
from rubricforge.jobs.base import JobResult, job_result
from rubricforge.jobs.items import ItemJob
from rubricforge.rewards.audit import audit_response, summarise_agreement
from rubricforge.io.datasets import load_examples
from rubricforge.rewards.responses import Response, load_responses
from rubricforge.rewards.judging import Judge
from rubricforge.io.files import atomic_write_text
from rubricforge.rundir import RunDir

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient


def audit_rewards(cfg: Config, dataset: str | Path, responses: str | Path, repeats: int = 3,
                  second_role: str = "verifier", out: str | Path | None = None, progress: bool = False) -> JobResult:
    """Audit the judge on ``responses`` (see the module docstring; the payload:
    :class:`~rubricforge.rewards.audit.AuditReport`)."""
    examples = load_examples(dataset)
    todo = load_responses(responses, examples, Rejects())
    run = RunDir(Path(responses).with_name(f"{Path(responses).stem}.audit.run"), "judge-agreement")
    job = _AuditJob(cfg, examples, repeats, second_role, run)
    job.inputs = {"dataset": str(Path(dataset).resolve()), "responses": str(Path(responses).resolve())}
    stats = asyncio.run(job.arun(todo, progress))
    report = summarise_agreement(job.models["judge"], job.models["second_judge"], repeats,
                       [job.log[r.key] for r in todo if r.key in job.log], job.unscored())
    report.status, report.out = stats.status, str(out or run / "report.json")
    atomic_write_text(report.out, json.dumps(asdict(report), indent=2) + "\n")
    return job_result(report, report.out, run)


class _AuditJob(ItemJob[Response]):
    """One response per item, keyed ``<id>#<line>``; its record is :func:`audit_response`'s."""

    stage = "auditing"
    undone_label = "responses not audited"

    def __init__(self, cfg: Config, examples: dict[str, dict[str, Any]], repeats: int, second_role: str, run: RunDir):
        self.models = {"judge": cfg.llm.role("judge").model,  # an unknown role: a UserError before any file
                       "second_judge": cfg.llm.role(second_role).model}
        super().__init__(run.log("audit"), cfg.llm, cfg.reward.concurrency, run, cfg)
        self.examples, self.repeats, self.second_role = examples, repeats, second_role
        self.roles = ("judge", second_role)
        self.seed = cfg.llm.judge.seed or 0
        self.judges: tuple[Judge, Judge] | None = None
        self.inputs: dict[str, str] = {}

    def key(self, item: Response) -> str:
        return item.key

    def settings(self) -> dict[str, Any]:
        return {**self.models, "second_role": self.second_role, "repeats": self.repeats, "seed": self.seed}

    def manifest_fields(self, client: LLMClient) -> dict[str, Any]:
        return {**self.inputs, "settings": self.settings()}

    def open(self, client: LLMClient) -> None:
        self.judges = Judge(client, "judge"), Judge(client, self.second_role)

    async def process(self, item: Response) -> dict[str, Any]:
        assert self.judges is not None
        return await audit_response(*self.judges, self.examples[item.example_id], item, self.repeats, self.seed)

    def unscored(self) -> dict[str, int]:
        a, b = self.judges or (None, None)
        return {"judge": sum(a.unscored.values()) if a else 0, "second_judge": sum(b.unscored.values()) if b else 0}
