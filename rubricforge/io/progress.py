"""The rich progress bar every job shows, on stderr."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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
