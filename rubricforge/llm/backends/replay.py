"""Replay backend: answers only from recorded responses; a miss raises :class:`ReplayMiss`."""

from __future__ import annotations

import threading
from typing import Any

from rubricforge.config import RoleConfig
from rubricforge.errors import UserError
from rubricforge.llm import recording
from rubricforge.llm.errors import ReplayMiss
from rubricforge.llm.request import Completion, Request


class ReplayBackend:
    name = "replay"

    def __init__(self, path: str | None):
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] | None = None

    def _load(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if self._entries is None:
                if not self.path:
                    raise UserError("a role uses the replay backend but llm.replay_path is not set",
                                    "set llm.replay_path to a recording made with llm.record_path")
                self._entries = recording.load_recording(self.path)
            return self._entries

    async def prepare(self, role: str, role_cfg: RoleConfig) -> None:
        self._load()

    async def complete(self, request: Request, role_cfg: RoleConfig) -> Completion:
        rec = self._load().get(request.key())
        if rec is None:
            raise ReplayMiss(f"no recorded response for {request.describe()} in {self.path}",
                             "record it by running once with llm.record_path set (in a test: fix its recording)")
        usage = rec.get("usage") or {}
        return Completion(text=rec["text"], prompt_tokens=int(usage.get("prompt_tokens", 0)),
                          completion_tokens=int(usage.get("completion_tokens", 0)), cost_usd=0.0)
