"""The run directory: one job's folder, ``config.yaml``, ``manifest.json`` (status, invocations, ledger, counts),
the resume guards, the per-worker ledger files, the stage logs, the export's record and the progress display.

Its files are written by :mod:`rubricforge.io` (atomic writes, stage logs, the progress bar). It stays a module of
its own above ``io``: it knows the job kinds (:data:`JOB_KINDS`), the config and the resume rules, which the
plain file services do not.
"""

from __future__ import annotations

import contextlib
import functools
import platform
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rubricforge.errors import UserError
from rubricforge.io.files import atomic_write_json, atomic_write_text, read_json
from rubricforge.io.progress import StageBar
from rubricforge.io.stagelog import LogKeys, StageLog, log_files

if TYPE_CHECKING:
    from pydantic import BaseModel

    from rubricforge.config import Config

M = TypeVar("M", bound="BaseModel")

MANIFEST = "manifest.json"
LEDGER_DIR = "ledgers"
VERSIONED_PACKAGES = ("rubricforge", "pydantic", "litellm", "llama_cpp_python", "sentence-transformers", "torch",
                      "faiss-cpu", "datasets", "networkx")
JOB_KINDS = {"tree": "an evidence-tree run", "kg": "a knowledge-graph run", "eval": "an evaluation run",
             "reward-score": "a reward-score run", "report": "a Report-RL data run", "rubric-gen": "a rubric generation run",
             "rubric-eval": "a rubric evaluation run", "judge-agreement": "a judge agreement run"}
FORMER_KINDS = {"score": "reward-score", "reward-audit": "judge-agreement"}  # kinds older manifests name


def job_kind(manifest: dict[str, Any]) -> str | None:
    """The job kind a manifest names (``job``; an older manifest's ``pipeline``, a former kind read as today's)."""
    found: str | None = manifest.get("job", manifest.get("pipeline"))
    return None if found is None else FORMER_KINDS.get(found, found)


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
    """One job's folder; ``kind`` names the job (``tree``, ``kg``, ``eval``, ...: the manifest's ``job``).

    The manifest lists the job's invocations, each with its status and its ledger (the sum of its
    workers' files ``ledgers/<invocation>--<worker>.json``); the run's ledger is their sum.
    """

    def __init__(self, path: str | Path, kind: str):
        self.path, self.kind = Path(path), kind

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

    def check_kind(self) -> None:
        """Refuse a folder that holds another job's run (a manifest-less one with trees is a tree run)."""
        found = job_kind(self.manifest()) or ("tree" if (self.path / "trees.jsonl").exists() else self.kind)
        if found != self.kind:
            raise UserError(f"{self.path} holds {JOB_KINDS.get(found, found)}",
                            f"give the {self.kind} job its own run directory (--run-dir runs/{self.kind})")

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
            "job": self.kind, "pipeline": self.kind,  # pipeline: job's former name, written until the next release
            "status": status, "run_dir": str(self.path), "updated": now(),
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

    def recount(self, invocation: str) -> None:
        """Sum the invocation's ledger files into the manifest again (a stage that ran after the finish, such as
        the quality gates, added one), its status unchanged."""
        self.set_status(invocation, self.manifest().get("status", "complete"))

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
        counted_keys, others = LogKeys(self.path / f"{counted}.jsonl"), {n: LogKeys(self.path / f"{n}.jsonl") for n in also}
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
