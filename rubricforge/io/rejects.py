"""Malformed input records: skipped, counted by reason, written to a rejects JSONL file.

Each line is ``{"file": ..., "line": ..., "reason": ..., "excerpt": ...}`` (``line`` is the 1-based
line of a JSONL file or the 0-based row of a parquet file / Hugging Face dataset; ``None`` for a
duplicate id, found only when the document is stored). The file is
written to a temp name and renamed on :meth:`Rejects.commit`, so a crash never leaves half a file
that looks finished. ``with Rejects(path) as rejects:`` commits when the block ends and discards the file
when it raises.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import Any

EXCERPT_CHARS = 200


class Rejects:
    """Collects rejected records; ``path=None`` only counts them."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self.by_reason: Counter[str] = Counter()
        self._fh = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = self.path.with_name(f".{self.path.name}.tmp")
            self._fh = self._tmp.open("w", encoding="utf-8")

    def __enter__(self) -> Rejects:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Commit after a block that ended; discard after one that raised (no half-written file next to a
        missing or unreadable input)."""
        if kind is None:
            self.commit()
        else:
            self.discard()

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def add(self, file: str | Path, line: int | None, reason: str, raw: Any = None) -> None:
        self.by_reason[reason] += 1
        if self._fh is not None:
            excerpt = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
            row = {"file": str(file), "line": line, "reason": reason,
                   "excerpt": None if raw is None else excerpt[:EXCERPT_CHARS]}
            self._fh.write(json.dumps(row, ensure_ascii=False) + "\n")

    def summary(self) -> dict[str, Any]:
        return {"total": self.total, "by_reason": dict(self.by_reason),
                "file": str(self.path) if self.path is not None and self.total else None}

    def commit(self) -> None:
        """Finish the file: rename it into place, or remove it when nothing was rejected."""
        if self._fh is None or self.path is None:
            return
        self._fh.close()
        self._fh = None
        if self.total:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)
            self.path.unlink(missing_ok=True)

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
            self._tmp.unlink(missing_ok=True)
