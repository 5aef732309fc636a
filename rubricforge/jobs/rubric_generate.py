"""`rubricforge rubrics generate`: a generator's rubrics for every question of a dataset (seed 004 §3.4; docs/methods.md Q-8).

Each distinct question gets one C.1 call to the generator role (a trained generator served there, or a
zero-shot model); its rubric is logged at once in ``<run_dir>/rubric-gen/rubrics.jsonl`` (read back on a
re-run, so a crash loses nothing) and written into the row's ``rubrics`` column as
``{id, type, title, description, weight}`` criteria. The output JSONL is what ``train grpo`` reads with
``train.reward=pref_rubric`` (S(r|y) of Eq. 2). A question whose rubric could not be read is left out of
the output and counted, never given an empty or invented rubric.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.rewards.inputs import load_examples
from rubricforge.rubric_gen.pref_rubrics import generate_rubrics
from rubricforge.rundir import StageBar, StageLog, atomic_write_text


@dataclass
class GenerateSummary:
    out: str
    rows: int
    written: int
    failed: int
    generated_now: int
    model: str


def generate_dataset_rubrics(cfg: Config, dataset: str | Path, out: str | Path, progress: bool = True
                             ) -> GenerateSummary:
    import json

    rows = list(load_examples(dataset).values())
    if not rows or any(not row.get("question") for row in rows):
        raise UserError(f"dataset {dataset} has no rows, or a row without a 'question'",
                        "pass a dataset whose rows have id and question")
    log: StageLog[Any] = StageLog(Path(cfg.run_dir) / "rubric-gen" / "rubrics.jsonl")
    made, fresh = asyncio.run(_generate(cfg, rows, log, progress))
    kept = [{**row, "rubrics": made[str(row["question"])], "rubric_source": "generated"}
            for row in rows if made.get(str(row["question"])) is not None]
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in kept))
    return GenerateSummary(str(out), len(rows), len(kept), len(rows) - len(kept), fresh,
                           cfg.llm.generator.model)


def _key(question: str) -> str:
    return hashlib.sha256(question.encode("utf-8")).hexdigest()[:16]


async def _generate(cfg: Config, rows: list[dict[str, Any]], log: StageLog, progress: bool
                    ) -> tuple[dict[str, list[dict[str, Any]] | None], int]:
    from rubricforge.llm import LLMClient

    questions = list(dict.fromkeys(str(r["question"]) for r in rows))
    todo = [q for q in questions if (log.get(_key(q)) or {}).get("rubrics") is None]
    client = LLMClient(cfg.llm)

    async def one(question: str, advance: Any) -> None:
        criteria = await generate_rubrics(client, question)
        log.append(_key(question), {"question": question, "model": client.model_name("generator"),
                                    "rubrics": None if criteria is None else [c.model_dump() for c in criteria]})
        advance(1)

    try:
        with StageBar(progress) as bar:
            advance = bar.task("rubrics", total=len(todo))
            await asyncio.gather(*(one(q, advance) for q in todo))
    finally:
        await client.aclose()
    return {q: (log.get(_key(q)) or {}).get("rubrics") for q in questions}, len(todo)
