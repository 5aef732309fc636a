"""Recorded responses (JSONL) for the replay backend.

One line per request: ``{"key", "role", "stage", "model", "messages", "schema_name", "text", "usage"}``,
keyed by :meth:`Request.key`. A run with ``llm.record_path`` set appends every response it uses (fresh or
from the cache, each key once); ``llm.replay_path`` points the replay backend at such a file.
To write one by hand (tests): ``entry(client.request(role, messages, output, stage), Completion(text))``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from rubricforge.errors import UserError, require_file
from rubricforge.llm.request import Completion, Request


def entry(request: Request, completion: Completion) -> dict[str, Any]:
    return {"key": request.key(), "role": request.role, "stage": request.stage, "model": request.model,
            "messages": request.messages, "schema_name": request.schema_name, "text": completion.text,
            "usage": {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens}}


def load_recording(path: str | Path) -> dict[str, dict[str, Any]]:
    """key -> recorded line. A damaged line is a UserError naming the file and line."""
    p = require_file(path, "replay file", "set llm.replay_path to a recording made with llm.record_path")
    out: dict[str, dict[str, Any]] = {}
    with p.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line.decode("utf-8"))
                out[rec["key"]] = rec
            except (ValueError, KeyError, TypeError):  # not UTF-8, not JSON, not a recorded response
                raise UserError(f"replay file {p} line {n} is not a recorded response",
                                "re-record it with llm.record_path, or delete the line") from None
    return out


class Recorder:
    """Appends responses to a JSONL file, each key once, safe across threads and processes
    (one ``O_APPEND`` write per line)."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._seen: set[str] = set(load_recording(self.path)) if self.path.is_file() else set()

    def append(self, request: Request, completion: Completion) -> None:
        line = json.dumps(entry(request, completion), ensure_ascii=False) + "\n"
        key = request.key()
        with self._lock:
            if key in self._seen:
                return
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
            self._seen.add(key)
