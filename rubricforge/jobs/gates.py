"""The quality gates: the last stage of the dataset jobs (tree and KG), before the export.

Decontamination and semantic dedup (:func:`rubricforge.pipelines.quality.apply_gates`) and, for the tree build
with ``quality.learnability``, the learnability gate (:mod:`rubricforge.rewards.learnability`). The gates' LLM
calls go through a client of the job's invocation whose ledger is ``ledgers/<invocation>--quality.json``, so the
manifest, the job's summary and the dataset card count them with the stages' calls. The outcome is
``quality.json`` in the run directory: the card's summary, every dropped id and the ids that were gated; the
export only reads it (:func:`rubricforge.export.run.read_gates`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from rubricforge.config import Config
from rubricforge.export.run import GATES_FILE
from rubricforge.io.files import atomic_write_json, read_json
from rubricforge.rundir import RunDir

WORKER = "quality"  # the gates' ledger file: ledgers/<invocation>--quality.json


def run_gates(cfg: Config, run_dir: RunDir, items: Sequence[tuple[str, str, Sequence[Any]]],
              learnability: bool = False) -> dict[str, Any]:
    """Gate ``(id, question, rubrics)`` items, write ``quality.json`` and return it; ``learnability``: also the
    closed-book gate when ``quality.learnability`` is on. The gates' LLM ledger joins the run's latest
    invocation (the one that just ran its stages) and the manifest's ledger is summed again."""
    from rubricforge.pipelines.quality import apply_gates

    report = apply_gates([(id_, question) for id_, question, _ in items], cfg)
    quality = report.summary
    if learnability and cfg.quality.learnability:
        kept = [item for item in items if item[0] not in report.dropped]
        invocations = read_json(run_dir / "manifest.json").get("invocations") or [{"id": "export"}]
        quality = _learnability(cfg, run_dir, str(invocations[-1]["id"]), kept, quality)
    record = {**quality, "gated": sorted(id_ for id_, _, _ in items)}
    atomic_write_json(run_dir / GATES_FILE, record)
    return record


def _learnability(cfg: Config, run_dir: RunDir, invocation: str, items: Sequence[tuple[str, str, Sequence[Any]]],
                  quality: dict[str, Any]) -> dict[str, Any]:
    """Closed-book rubric scores: too-easy items flagged, and dropped when ``quality.drop_too_easy``."""
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.learnability import learnability

    client = LLMClient(cfg.llm)

    async def scores() -> Any:
        try:
            return await learnability(items, cfg, client)
        finally:
            await client.aclose()

    try:
        got = asyncio.run(scores())
    finally:
        atomic_write_json(run_dir.ledger_path(invocation, WORKER), {"ledger": client.ledger.summary()})
        run_dir.recount(invocation)
    q = cfg.quality
    flagged = [{"id": i, "gate": "learnability", "method": "closed-book", "score": round(s, 4),
                "dropped": q.drop_too_easy} for i in got.too_easy if (s := got.scores[i]) is not None]
    dropped = sorted([*quality.get("dropped", []), *(f for f in flagged if f["dropped"])], key=lambda d: d["id"])
    return {**quality, "dropped": dropped, "learnability": {**got.summary(q.too_easy_threshold, q.drop_too_easy),
                                                            "flagged": flagged}}
