"""Per-request response cache in SQLite, addressed by :meth:`Request.key`.

Shared by runs and processes: WAL journal, a busy timeout, one connection per thread. Only valid
answers are stored (the client decides); a locked or broken database never fails a run: a read is a
miss and a write is skipped, with a warning.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

from rubricforge.errors import UserError
from rubricforge.llm.request import Completion, Request

log = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created REAL NOT NULL)"""


class ResponseCache:
    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0):
        self.path = Path(path).expanduser()
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn().execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"LLM cache {self.path} cannot be opened ({exc})",
                            "set llm.cache_path to a writable file, or to \"\" to disable the cache") from None

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def get(self, request: Request) -> Completion | None:
        try:
            row = self._conn().execute("SELECT text, prompt_tokens, completion_tokens FROM responses WHERE key = ?",
                                       (request.key(),)).fetchone()
        except sqlite3.Error as exc:
            log.warning("LLM cache %s unreadable (%s); treating as a miss", self.path, exc)
            return None
        if row is None:
            return None
        return Completion(text=row[0], prompt_tokens=row[1], completion_tokens=row[2], cost_usd=0.0)

    def put(self, request: Request, completion: Completion) -> None:
        try:
            self._conn().execute(
                "INSERT OR REPLACE INTO responses (key, model, text, prompt_tokens, completion_tokens, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (request.key(), request.model, completion.text, completion.prompt_tokens,
                 completion.completion_tokens, time.time()))
        except sqlite3.Error as exc:
            log.warning("LLM cache %s not written (%s); the answer is still used", self.path, exc)

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
