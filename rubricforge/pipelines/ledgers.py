"""Per-worker ledger files of a run (``ledgers/<invocation>--<worker>.json``) and their sums."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LEDGER_DIR = "ledgers"


def ledger_path(run_dir: str | Path, invocation: str, worker: str) -> Path:
    return Path(run_dir) / LEDGER_DIR / f"{invocation}--{worker}.json"


def invocation_totals(run_dir: str | Path, invocation: str) -> dict[str, Any]:
    """One invocation's files summed: ``ledger`` (by role, stage, total), ``computed``, ``ok``, ``failed``."""
    records = []
    for path in sorted((Path(run_dir) / LEDGER_DIR).glob(f"{invocation}--*.json")):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):  # being replaced right now: counted at the next read
            continue
    return sum_ledgers(records)


def sum_ledgers(ledgers: list[dict[str, Any]]) -> dict[str, Any]:
    """Numbers summed key by key through nested dicts."""
    out: dict[str, Any] = {}
    for ledger in ledgers:
        for key, value in ledger.items():
            if isinstance(value, dict):
                out[key] = sum_ledgers([out.get(key, {}), value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    return out
