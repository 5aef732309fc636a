"""`rubricforge rubrics generate`: a generator's rubrics for every question of a dataset (Prefs §3.4; docs/methods.md Q-8).

Each distinct question gets one C.1 call to the generator role (a trained generator served there, or a
zero-shot model); its rubric is logged at once in ``<run_dir>/rubric-gen/rubrics.jsonl``, keyed by generator
model and question (read back on a re-run, so a crash loses nothing; a new generator makes its own), and
written into the row's ``rubrics`` column as ``{id, type, title, description, weight}`` criteria. The folder
``<run_dir>/rubric-gen/`` is the job's run directory (``manifest.json``: each invocation's dataset, output,
generator model, status, counts and LLM ledger; ``config.yaml``). The output
JSONL is what ``train grpo`` reads with ``train.reward=pref_rubric`` (S(r|y) of Eq. 2). A question whose
rubric could not be read is left out of the output and counted, never given an empty or invented rubric.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.jobs.base import JobResult, job_result
from rubricforge.jobs.items import ItemJob
from rubricforge.io.datasets import load_examples
from rubricforge.rubric_gen.pref_rubrics import generate_rubrics
from rubricforge.io.files import atomic_write_text
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient


@dataclass
class GenerateSummary:
    out: str
    rows: int
    written: int
    failed: int
    generated_now: int
    model: str
    status: str = "complete"  # or "stopped: <why>" (a budget stop: the rows whose rubrics are made are written)

    def lines(self) -> list[str]:
        return [f"{self.written} of {self.rows} rows with rubrics from {self.model} ({self.generated_now} generated "
                f"now, {self.failed} unreadable and left out) -> {self.out}"]


def generate_dataset_rubrics(cfg: Config, dataset: str | Path, out: str | Path, progress: bool = True
                             ) -> JobResult:
    """Rubrics for every question of ``dataset``, written with its rows to ``out`` (the payload:
    :class:`GenerateSummary`)."""
    import json

    rows = list(load_examples(dataset).values())
    if not rows or any(not row.get("question") for row in rows):
        raise UserError(f"dataset {dataset} has no rows, or a row without a 'question'",
                        "pass a dataset whose rows have id and question")
    run = RunDir(Path(cfg.run_dir) / "rubric-gen", "rubric-gen")
    job = _GenerateJob(run.log("rubrics"), cfg, run, {"dataset": str(Path(dataset).resolve()),
                                                      "out": str(Path(out).resolve())})
    log = job.log
    questions = list(dict.fromkeys(str(r["question"]) for r in rows))
    stats = asyncio.run(job.arun(questions, progress))
    made = {q: (log.get(job.key(q)) or {}).get("rubrics") for q in questions}
    kept = [{**row, "rubrics": made[str(row["question"])], "rubric_source": "generated"}
            for row in rows if made.get(str(row["question"])) is not None]
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in kept))
    summary = GenerateSummary(str(out), len(rows), len(kept), len(rows) - len(kept), stats.done_now, job.model,
                              stats.status)
    return job_result(summary, out, run)


class _GenerateJob(ItemJob[str]):
    """One question per item, keyed by the generator model and the question: rubrics another generator made
    are never reused for this one (they stay in the log, for a re-run with that model)."""

    stage = "rubrics"
    undone_label = "questions without a rubric (unreadable answers)"
    roles = ("generator",)

    def __init__(self, log: StageLog[Any], cfg: Config, run: RunDir, paths: dict[str, str]):
        super().__init__(log, cfg.llm, cfg.llm.generator.concurrency, run, cfg)
        self.model, self.paths = cfg.llm.generator.model, paths
        self.client: LLMClient | None = None

    def key(self, item: str) -> str:
        return hashlib.sha256(f"{self.model}\n{item}".encode()).hexdigest()[:16]

    def finished(self, record: dict[str, Any] | None) -> bool:
        return record is not None and record.get("rubrics") is not None

    def manifest_fields(self, client: LLMClient) -> dict[str, Any]:
        return {**self.paths, "models": {"generator": client.model_name("generator")}}

    def open(self, client: LLMClient) -> None:
        self.client = client

    async def process(self, item: str) -> dict[str, Any]:
        assert self.client is not None
        criteria = await generate_rubrics(self.client, item)
        return {"question": item, "model": self.client.model_name("generator"),
                "rubrics": None if criteria is None else [c.model_dump() for c in criteria]}
