"""The resumable item-job base (in the spirit of datatrove's ``PipelineStep``): a job is a list of items, a
key per item, ``async process(item)`` returning the item's record, and the settings its records depend on.

:meth:`ItemJob.arun` owns what every such job repeated: it skips items whose key already has a finished
record in the job's keyed :class:`~rubricforge.io.stagelog.StageLog`, refuses to mix records made under other
settings with new ones (a UserError, exit 2), runs the rest at most ``concurrency`` at a time under one
LLM client and one progress bar, appends each item's record as soon as it is made (an item whose
``process`` raised is not recorded, so a re-run does it again), cancels the rest when one item raises,
stops on a spent LLM budget with what is finished kept, and closes the client however it ended. Its stats
carry the job's status by the one ending rule (:mod:`rubricforge.jobs.base`): ``stopped: <why>`` after a budget
stop, ``incomplete: <n> of <m> ...`` when items are left without a finished record (unscored, failed; the job
writes its output as usual and the CLI exits non-zero), else ``complete``. An item done again replaces its
record: the log holds one line per item after the run (:meth:`~rubricforge.io.stagelog.StageLog.compact`). Before
any of that it runs the preflight of the LLM ``roles`` it calls (:func:`~rubricforge.llm.check.preflight_roles`: keys,
models, servers). A job given a
:class:`~rubricforge.rundir.RunDir` (``run``) also gets its manifest there: ``config.yaml`` (``cfg``), the
invocation with its status (``running``, then how it ended), :meth:`ItemJob.manifest_fields` (settings,
models, provenance), the item counts and the invocation's LLM ledger (``ledgers/``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rubricforge.errors import UserError
from rubricforge.jobs.base import ending, incomplete
from rubricforge.io.files import atomic_write_json, read_json
from rubricforge.io.progress import StageBar
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir, now

if TYPE_CHECKING:
    from rubricforge.config import Config, LLMConfig
    from rubricforge.llm import LLMClient

T = TypeVar("T")


@dataclass
class ItemStats:
    items: int  # distinct items asked for
    done_before: int  # finished by an earlier run (read back, not redone)
    done_now: int  # finished by this run (its items whose new record is finished: scored, not just attempted)
    status: str = "complete"  # or "stopped: <why>" after a budget stop, "incomplete: ..." with items undone
    undone: int = 0  # items without a finished record after the run (unscored, failed, not reached)


class ItemJob(Generic[T]):
    """Subclasses set ``stage`` (the progress bar's label) and define :meth:`key` and :meth:`process`;
    :meth:`finished` (default: any record) says which records a re-run keeps, :meth:`settings` (default:
    none) what the records depend on, :meth:`group` which items run together, :meth:`open` / :meth:`close` what
to build on the job's client before the first item and release after the last."""

    stage = "items"
    roles: tuple[str, ...] = ()  # the LLM roles process() calls: checked before any work
    undone_label = "items not done (unscored or failed)"  # the status's words for items left without a finished record

    def __init__(self, log: StageLog[Any], llm: LLMConfig, concurrency: int | None = None, run: RunDir | None = None,
                 cfg: Config | None = None):
        """``run``: the job's run directory, for its manifest (and ``cfg``: its ``config.yaml``)."""
        self.log, self.llm, self.concurrency, self.run, self.cfg_file = log, llm, concurrency, run, cfg
        self.invocation, self.started = uuid.uuid4().hex[:12], now()

    def key(self, item: T) -> str:
        raise NotImplementedError

    async def process(self, item: T) -> dict[str, Any] | None:
        """The item's record (None: the item could not be done now; nothing is recorded)."""
        raise NotImplementedError

    def group(self, item: T) -> str:
        """Items run group by group, in the order their groups first appear, one bar row each (default: one)."""
        return ""

    def finished(self, record: dict[str, Any] | None) -> bool:
        return record is not None

    def settings(self) -> dict[str, Any]:
        return {}

    def manifest_fields(self, client: LLMClient) -> dict[str, Any]:
        """What the manifest records besides status, counts and ledger (default: the settings)."""
        return {"settings": self.settings()}

    def counts(self, stats: ItemStats) -> dict[str, Any]:
        """The manifest's counts after a run (default: the item stats)."""
        return {"items": stats.items, "done_before": stats.done_before, "done_now": stats.done_now}

    def incomplete(self, undone: list[str], total: int) -> str:
        """The status after a run that left the keys ``undone`` (of ``total``) without a finished record."""
        return incomplete(len(undone), total, self.undone_label)

    def open(self, client: LLMClient) -> None:
        """Build what :meth:`process` needs from the job's client (called once, before the first item)."""

    def close(self) -> None:
        """Release what :meth:`open` built (called once, however the job ended, before the client closes)."""

    # ---------------------------------------------------------------- the one implementation

    def pending(self, items: Sequence[T]) -> list[T]:
        """The distinct items (by key, first one wins) that have no finished record."""
        unique = {self.key(item): item for item in reversed(items)}
        return [item for key, item in reversed(unique.items()) if not self.finished(self.log.get(key))]

    def check_settings(self) -> None:
        """The resume guard: ``<log>.settings.json`` holds the settings of the log's records; other settings
        are refused while the log holds records, and written when it holds none."""
        settings = self.settings()
        if not settings:
            return
        path = self.log.path.with_name(f"{self.log.path.stem}.settings.json")
        previous = read_json(path) if path.exists() else {}
        if previous == settings:
            return
        if previous and len(self.log):
            changed = ", ".join(f"{k}: {previous.get(k)!r} -> {v!r}" for k, v in settings.items()
                                if previous.get(k) != v)
            raise UserError(f"{self.log.path} holds records made with other settings ({changed})",
                            f"use the same settings to resume, or another output (or delete {self.log.path})")
        atomic_write_json(path, settings)

    async def arun(self, items: Sequence[T], progress: bool = True) -> ItemStats:
        from rubricforge.llm import LLMClient
        from rubricforge.llm.check import apreflight_roles

        await apreflight_roles(self.llm, list(self.roles))
        self.check_settings()
        keys = {self.key(item) for item in items}
        todo = self.pending(items)
        client = LLMClient(self.llm)
        slots = asyncio.Semaphore(self.concurrency or max(len(todo), 1))
        done: list[T] = []

        async def one(item: T, advance: Callable[[int], None]) -> None:
            async with slots:
                record = await self.process(item)
            if record is not None:
                self.log.append(self.key(item), record)
                if self.finished(self.log.get(self.key(item))):
                    done.append(item)
            advance(1)

        groups: dict[str, list[T]] = {}
        for item in todo:
            groups.setdefault(self.group(item), []).append(item)
        if self.run is not None:
            self.run.check_kind()
            if self.cfg_file is not None:
                self.run.write_config(self.cfg_file)
            fields = self.manifest_fields(client)
            self.run.write_manifest(self.invocation, self.started, "running", fields)
        try:
            with StageBar(progress) as bar, ending(self.run, self.invocation) as outcome:
                self.open(client)
                for name, members in groups.items():
                    advance = bar.task(f"{self.stage} · {name}" if name else self.stage, total=len(members))
                    tasks = [asyncio.ensure_future(one(item, advance)) for item in members]
                    try:
                        await asyncio.gather(*tasks)
                    except BaseException:
                        for task in tasks:
                            task.cancel()
                        await asyncio.gather(*tasks, return_exceptions=True)
                        raise
        finally:
            try:
                self.close()
            finally:
                if self.run is not None:
                    atomic_write_json(self.run.ledger_path(self.invocation, "main"), {"ledger": client.ledger.summary()})
                self.log.compact()
                await client.aclose()
        undone = [key for key in keys if not self.finished(self.log.get(key))]
        status = self.incomplete(undone, len(keys)) if outcome.status == "complete" and undone else outcome.status
        stats = ItemStats(len(keys), len(keys) - len(todo), len(done), status, len(undone))
        if self.run is not None:
            self.run.write_manifest(self.invocation, self.started, stats.status, fields, self.counts(stats))
        return stats
