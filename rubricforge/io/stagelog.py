"""Keyed stage logs: append-only JSONL of finished work items, read back on resume.

A line is written and flushed to the OS as soon as its item is done (a killed process loses none); its fsync
follows on a background thread (only a power cut can lose the last lines). A torn last line from a SIGKILL is
ignored on read, so the item is simply redone. A worker process writes its own *shard*
(``<name>.shards/<worker>.jsonl``), so workers never append to one file together; reading a log reads its
shards too, and :meth:`StageLog.merge` folds them into the log.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rubricforge.errors import UserError
from rubricforge.io.files import atomic_write_text

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")



def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            try:
                record = json.loads(line)
            except ValueError:  # torn last line after a crash (maybe cut inside a UTF-8 character): that item is redone
                continue
            if isinstance(record, dict) and "key" in record:
                yield str(record["key"]), record


def _append(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as fh:
        if fh.tell():
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")  # isolate a torn line left by a crash
        fh.write("".join(line + "\n" for line in lines).encode("utf-8", errors="replace"))  # lone surrogate: "?"
        fh.flush()
        _fsync_soon(fh.fileno())


_syncer: ThreadPoolExecutor | None = None
_syncer_lock = threading.Lock()


def _fsync_soon(fileno: int) -> None:
    """fsync a log on a background thread. The lines are already the OS's when ``_append`` returns (a killed
    process loses none of them); the fsync only guards against a power cut, and took about 10 ms per record
    on the caller's thread, the event loop that all LLM calls wait on. Pending fsyncs finish at exit."""
    global _syncer
    fd = os.dup(fileno)
    with _syncer_lock:
        if _syncer is None:
            _syncer = ThreadPoolExecutor(1, thread_name_prefix="rubricforge-fsync")
        _syncer.submit(_fsync_close, fd)


def _fsync_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _forget_syncer() -> None:  # a forked child has no syncer thread: it starts its own
    global _syncer
    _syncer = None


os.register_at_fork(after_in_child=_forget_syncer)


def log_files(path: Path) -> list[Path]:
    """A stage log's file, then its shards (``<stem>.shards/*.jsonl``), the order in which their lines count."""
    return [path, *sorted(path.with_name(f"{path.stem}.shards").glob("*.jsonl"))]


class StageLog(Generic[M]):
    """Append-only JSONL of ``{"key": ..., **record}`` lines; the last line for a key wins.

    ``shard`` (a worker id): this process appends to ``<name>.shards/<shard>.jsonl`` instead of the log.
    ``model`` (with ``field``: the record's payload is ``record[field]``, else the record itself): the
    typed view, :meth:`item` / :meth:`add`; a record that no longer validates is a UserError naming it.
    """

    def __init__(self, path: str | Path, shard: str | None = None, model: type[M] | None = None,
                 field: str | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.shard_dir = self.path.with_name(f"{self.path.stem}.shards")
        self._write_to = self.path if shard is None else self.shard_dir / f"{shard}.jsonl"
        self.model, self.field = model, field
        self._lock = threading.Lock()
        self._done: dict[str, dict[str, Any]] = dict(_lines(self.path))
        self._shards = self.files()[1:]
        self._unmerged: dict[str, dict[str, Any]] = {}  # shard records that differ from the log's, for merge()
        for shard_file in self._shards:
            for key, record in _lines(shard_file):
                if self._done.get(key) != record:
                    self._done[key] = self._unmerged[key] = record

    def files(self) -> list[Path]:
        """The log, then its shards (the order in which their lines count)."""
        return log_files(self.path)

    def __contains__(self, key: str) -> bool:
        return key in self._done

    def __len__(self) -> int:
        return len(self._done)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._done.get(key)

    def __getitem__(self, key: str) -> dict[str, Any]:
        """The record of a finished key (KeyError when there is none)."""
        return self._done[key]

    def finished(self, key: str) -> M:
        """The typed record of a key known to be finished (KeyError when there is none)."""
        if (record := self.item(key)) is None:
            raise KeyError(key)
        return record

    def records(self) -> list[dict[str, Any]]:
        return list(self._done.values())

    def keys(self) -> list[str]:
        return list(self._done)

    def append(self, key: str, record: dict[str, Any]) -> None:
        line = json.dumps({"key": key, **record}, ensure_ascii=False, default=str)
        with self._lock:
            _append(self._write_to, [line])
            self._done[key] = {"key": key, **record}

    def item(self, key: str) -> M | None:
        """The typed record of ``key`` (None when there is none)."""
        from pydantic import ValidationError

        assert self.model is not None, "a typed StageLog needs a model"
        record = self._done.get(key)
        if record is None:
            return None
        try:
            if self.field:
                return self.model.model_validate(record[self.field])
            return self.model.model_validate({k: v for k, v in record.items() if k != "key"})
        except (KeyError, ValidationError) as exc:
            why = f"no '{self.field}' field" if isinstance(exc, KeyError) else _first_error(exc)
            raise UserError(f"{self.path.name} record {key!r} does not match the {self.model.__name__} schema ({why})",
                            "delete that line to redo the item, or use a new run directory") from None

    def add(self, key: str, item: M) -> M:
        payload = item.model_dump(mode="json")
        self.append(key, {self.field: payload} if self.field else payload)
        return item

    def compact(self) -> int:
        """Rewrite the log (not its shards) with one line per key, the last record of each (temp file + rename: a
        crash leaves the old log or the new one), when a key has several lines; returns how many were dropped."""
        with self._lock:
            if self._write_to != self.path or not self.path.exists():
                return 0
            latest = dict(_lines(self.path))
            lines = sum(1 for _ in _lines(self.path))
            if lines == len(latest):
                return 0
            text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in latest.values())
            atomic_write_text(self.path, text.encode("utf-8", errors="replace").decode("utf-8"))  # as _append
            return lines - len(latest)

    def merge(self) -> int:
        """Fold the shards that were there when this log was opened into the log (their records that differ
        from it) and remove them; returns how many records were added. Nothing is read again: a crash in
        between leaves duplicates, which read the same."""
        with self._lock:
            if self._unmerged:
                _append(self.path, [json.dumps(r, ensure_ascii=False, default=str) for r in self._unmerged.values()])
            for shard in self._shards:
                shard.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.shard_dir.rmdir()
            added, self._unmerged, self._shards = len(self._unmerged), {}, []
        return added


def _first_error(exc: Any) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(x) for x in err['loc']) or 'record'}: {err['msg']}"


class LogKeys:
    """The keys of a stage log and its shards, read incrementally (a torn last line waits for its newline)."""

    def __init__(self, log: Path):
        self.log = log
        self.offsets: dict[Path, int] = {}
        self.keys: set[str] = set()

    def poll(self) -> set[str]:
        shard_dir = self.log.with_name(f"{self.log.stem}.shards")
        for path in [self.log, *sorted(shard_dir.glob("*.jsonl"))]:
            offset = self.offsets.get(path, 0)
            try:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1
            for line in data[:end].splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    self.keys.add(json.loads(line)["key"])
            self.offsets[path] = offset + end
        return self.keys
