"""The run directory: every artefact of a job under one folder, written so a crash loses nothing.

* :func:`atomic_write_text` / :func:`atomic_write_json` — temp file + fsync + rename;
  :func:`read_json` — the one reader of the JSON files a run keeps.
* :class:`StageLog` — append-only JSONL of finished work items, keyed, read back on resume. A line
  is written and flushed to the OS as soon as its item is done (a killed process loses none); its fsync
  follows on a background thread (only a power cut can lose the last lines). A torn last line from a
  SIGKILL is ignored on read, so the item is simply redone. A worker process writes its own *shard*
  (``<name>.shards/<worker>.jsonl``), so workers never append to one file together; reading a log
  reads its shards too, and :meth:`StageLog.merge` folds them into the log.
* :class:`RunDir` — one job's folder: ``config.yaml``, ``manifest.json`` (status, invocations, ledger,
  counts), the resume guards, the per-worker ledger files, the stage logs, the export's record and
  the progress display.
* :class:`StageBar` — the rich progress bar every job shows.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rubricforge.errors import UserError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from rubricforge.config import Config

M = TypeVar("M", bound="BaseModel")

MANIFEST = "manifest.json"
LEDGER_DIR = "ledgers"
VERSIONED_PACKAGES = ("rubricforge", "pydantic", "litellm", "llama_cpp_python", "sentence-transformers", "torch",
                      "faiss-cpu", "datasets", "networkx")
PIPELINE_NAMES = {"tree": "an evidence-tree run", "kg": "a knowledge-graph run", "eval": "an evaluation run",
                  "score": "a reward-score run", "report": "a Report-RL data run", "rubric-gen": "a rubric generation run",
                  "rubric-eval": "a rubric evaluation run"}


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def read_json(path: str | Path, fix: str = "restore it or delete it to start that step over") -> dict[str, Any]:
    """The JSON object in ``path``; {} when the file is missing. Anything else is a UserError naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not readable JSON ({type(exc).__name__})", fix) from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object", fix)
    return data


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


# ---------------------------------------------------------------- stage logs


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


class _LogKeys:
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


# ---------------------------------------------------------------- ledgers


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


def ledger_stats(ledger: dict[str, Any]) -> str:
    """``N calls · Xk tok · $C`` of a ledger's totals, for progress bars."""
    total = ledger.get("total", {})
    tokens = int(total.get("prompt_tokens", 0)) + int(total.get("completion_tokens", 0))
    return f"{int(total.get('calls', 0))} calls · {tokens / 1000:.1f}k tok · ${float(total.get('cost_usd', 0.0)):.4f}"


# ---------------------------------------------------------------- the run directory


class RunDir:
    """One job's folder (``pipeline``: ``tree`` or ``kg``).

    The manifest lists the job's invocations, each with its status and its ledger (the sum of its
    workers' files ``ledgers/<invocation>--<worker>.json``); the run's ledger is their sum.
    """

    def __init__(self, path: str | Path, pipeline: str):
        self.path, self.pipeline = Path(path), pipeline

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def log(self, name: str, shard: str | None = None, model: type[M] | None = None,
            field: str | None = None) -> StageLog[M]:
        return StageLog(self.path / f"{name}.jsonl", shard, model, field)

    def has_records(self, name: str) -> bool:
        """Whether the stage log ``name`` or one of its shards holds anything (without reading it)."""
        return any(f.stat().st_size for f in log_files(self.path / f"{name}.jsonl") if f.exists())

    # ---------------------------------------------------------- manifest and guards

    def manifest(self) -> dict[str, Any]:
        return read_json(self.path / MANIFEST, "restore it, or re-run the build in a new run directory")

    def check_pipeline(self) -> None:
        """Refuse a folder that holds another pipeline's run (a manifest-less one with trees is a tree run)."""
        found = self.manifest().get("pipeline", "tree" if (self.path / "trees.jsonl").exists() else self.pipeline)
        if found != self.pipeline:
            raise UserError(f"{self.path} holds {PIPELINE_NAMES.get(found, found)}",
                            f"give the {self.pipeline} build its own run directory (--run-dir runs/{self.pipeline})")

    def check_settings(self, key: str, settings: dict[str, Any], has_work: bool, what: str) -> None:
        """The resume guard: work made under other ``settings`` (manifest ``key``) is never mixed with new work."""
        previous = self.manifest().get(key)
        if not previous or previous == settings or not has_work:
            return
        changed = ", ".join(f"{k}: {previous.get(k)!r} -> {v!r}" for k, v in settings.items() if previous.get(k) != v)
        raise UserError(f"{self.path} holds {what} made with other settings ({changed})",
                        "use a new run directory (--run-dir runs/<new>) or the same settings to resume")

    def write_config(self, cfg: Config) -> None:
        import yaml

        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path / "config.yaml", yaml.safe_dump(cfg.public_dict(), sort_keys=False))

    def write_manifest(self, invocation: str, started: str, status: str, fields: dict[str, Any],
                       counts: dict[str, Any] | None = None) -> None:
        """The manifest: ``fields`` (the job's corpus, models, settings...), ``counts`` (None: keep the previous
        ones) and every invocation's ledger summed anew from its workers' files."""
        previous = self.manifest()
        invocations = [i for i in previous.get("invocations", []) if i.get("id") != invocation]
        invocations.append({"id": invocation, "started": started, "status": status})
        for inv in invocations:
            inv["ledger"] = self.invocation_totals(inv["id"]).get("ledger") or inv.get("ledger", {})
        invocations[-1]["updated"] = now()
        atomic_write_json(self.path / MANIFEST, {
            "pipeline": self.pipeline, "status": status, "run_dir": str(self.path), "updated": now(),
            "versions": versions(), **fields, "counts": previous.get("counts", {}) if counts is None else counts,
            "ledger": sum_ledgers([i["ledger"] for i in invocations]), "invocations": invocations})

    def set_status(self, invocation: str, status: str) -> None:
        """Say how the invocation ended (nothing when the manifest does not list it: it never started)."""
        manifest = self.manifest()
        invocations = manifest.get("invocations", [])
        if not any(i.get("id") == invocation for i in invocations):
            return
        for inv in invocations:
            if inv.get("id") == invocation:
                inv.update(status=status, updated=now(), ledger=self.invocation_totals(invocation).get("ledger")
                           or inv.get("ledger", {}))
        manifest.update(status=status, updated=now(), ledger=sum_ledgers([i.get("ledger", {}) for i in invocations]))
        atomic_write_json(self.path / MANIFEST, manifest)

    def record_export(self, dataset_dir: str, viewer: str, rows: int) -> None:
        """Add the export's paths and row count to the manifest, and whether it is partial: the export of a run
        that did not end ``complete`` (it failed or stopped; a re-run finishes it and exports again)."""
        manifest = self.manifest()
        manifest.update(dataset_dir=dataset_dir, viewer=viewer, dataset_rows=rows,
                        dataset_partial=manifest.get("status", "complete") != "complete")
        atomic_write_json(self.path / MANIFEST, manifest)

    # ---------------------------------------------------------- ledgers

    def ledger_path(self, invocation: str, worker: str) -> Path:
        return self.path / LEDGER_DIR / f"{invocation}--{worker}.json"

    def invocation_totals(self, invocation: str) -> dict[str, Any]:
        """One invocation's files summed: ``ledger`` (by role, stage, total), ``computed``, ``ok``, ``failed``."""
        records = []
        for path in sorted((self.path / LEDGER_DIR).glob(f"{invocation}--*.json")):
            with contextlib.suppress(UserError):  # being written by hand: counted at the next read
                records.append(read_json(path))
        return sum_ledgers(records)

    # ---------------------------------------------------------- progress

    @contextlib.contextmanager
    def watch(self, label: str, counted: str, wanted: Sequence[str], invocation: str, also: Sequence[str] = (),
              enabled: bool = True, interval_s: float = 1.0) -> Iterator[None]:
        """A progress bar while the body runs, read from this folder, so it shows work done by any process:
        the ``wanted`` keys in log ``counted``, the sizes of the logs ``also``, the invocation's LLM calls,
        tokens and cost (nothing when ``enabled`` is false)."""
        if not enabled:
            yield
            return
        counted_keys, others = _LogKeys(self.path / f"{counted}.jsonl"), {n: _LogKeys(self.path / f"{n}.jsonl") for n in also}
        wanted_set, stop = set(wanted), threading.Event()

        def state() -> dict[str, Any]:
            sizes = "".join(f"{name} {len(keys.poll())} · " for name, keys in others.items())
            return {"completed": len(counted_keys.poll() & wanted_set),
                    "stats": sizes + ledger_stats(self.invocation_totals(invocation).get("ledger", {}))}

        with StageBar(True) as bar:
            task = bar.add(label, total=len(wanted_set))

            def refresh() -> None:
                while True:
                    bar.update(task, **state())
                    if stop.wait(interval_s):
                        return

            thread = threading.Thread(target=refresh, name="rubricforge-progress", daemon=True)
            thread.start()
            try:
                yield
            finally:
                stop.set()
                thread.join()
                bar.update(task, **state())


class StageBar:
    """A rich progress bar on stderr (nothing when disabled): one row per task, with an optional stats text."""

    def __init__(self, enabled: bool):
        self._p = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.table import Column

            self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                               TimeElapsedColumn(), TimeRemainingColumn(),
                               TextColumn("{task.fields[stats]}", table_column=Column(ratio=1, overflow="fold")),
                               console=Console(stderr=True), refresh_per_second=2)

    def __enter__(self) -> StageBar:
        if self._p is not None:
            self._p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.stop()

    def add(self, description: str, total: int | None = None) -> Any:
        """A new row; its id for :meth:`update` (None when disabled)."""
        return None if self._p is None else self._p.add_task(description, total=total, stats="")

    def update(self, task: Any, **fields: Any) -> None:
        """Set a row's ``completed``, ``advance`` or ``stats``."""
        if self._p is not None:
            self._p.update(task, **fields)

    def task(self, description: str, total: int | None = None,
             stats: Callable[[], str] | None = None) -> Callable[[int], None]:
        """A new row and its ``advance(n)`` (which also refreshes ``stats()`` when given)."""
        task_id = self.add(description, total)
        if self._p is None:
            return lambda n: None
        return lambda n: self.update(task_id, advance=n, **({"stats": stats()} if stats else {}))

    def finish_open_tasks(self) -> None:
        """Mark tasks of unknown size as complete (e.g. loading, whose record count was unknown)."""
        if self._p is not None:
            for task in self._p.tasks:
                if task.total is None:
                    self._p.update(task.id, total=task.completed)
                    self._p.stop_task(task.id)

    def log(self, message: str) -> None:
        if self._p is not None:
            self._p.console.log(message)


def check_writable_dir(path: str | Path, what: str, knob: str) -> None:
    """Raise a UserError (naming ``what`` and the ``knob`` that sets it) unless ``path`` is, or can be made,
    a writable folder."""
    from rubricforge.errors import UserError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{what} {path} is a file, not a folder", f"pass another path with {knob}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{what} {path} is not writable ({exc.strerror})",
                        f"pass a folder you can write to with {knob}") from None
