"""What every command group shares: the common options, the config from ``--config`` / ``--set`` / flags, the
console helpers (tables, numbers, a job's result lines) and how a job's command ends (:func:`end`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from rubricforge.config import Config
    from rubricforge.jobs.base import JobResult

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML config file.")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", "-s", help="Override a config key: --set build.max_depth=2 (repeatable).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs too (always written to the "
                                          "run directory's logs/).")]
DatasetOpt = Annotated[Path, typer.Option("--dataset", "-d", help="Dataset folder, run directory, .jsonl or .parquet.")]
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Policy model: a local folder or a cached Hub name.")]


def cli_config(config: Path | None, overrides: list[str] | None, **flags: object) -> Config:
    """The config: ``--config`` < environment < ``--set`` texts < the flags that were given (typed values by dotted
    key, passed as they are; a path becomes its text)."""
    from rubricforge.config import load_config

    values = {key: str(v) if isinstance(v, Path) else v for key, v in flags.items() if v is not None}
    return load_config(config, overrides, values=values)


def console() -> Console:
    """Where commands print: stderr (stdout is kept for what a command outputs, e.g. `corpus search`)."""
    from rich.console import Console

    return Console(stderr=True)


def table(*columns: str) -> Table:
    from rich.table import Table

    out = Table()
    for c in columns:
        out.add_column(c)
    return out


def fmt(x: float | None) -> str:
    """A metric with three decimals; ``-`` when there is none."""
    return "-" if x is None else f"{x:.3f}"


def print_result(result: JobResult, notes: Sequence[str] = ()) -> None:
    """A job's :meth:`~rubricforge.jobs.base.JobResult.lines`, its status coloured and its summary's warnings
    after the call line, then ``notes``."""
    from rich.text import Text

    status = result.summary.status
    head, call, *rest = result.lines()
    out = console()
    out.print(Text(status, style="green" if status == "complete" else "yellow") + Text(head.removeprefix(status)))
    out.print(Text(call))
    for warning in getattr(result.summary, "warnings", []):
        out.print(Text("warning:", style="yellow") + Text(f" {warning}"))
    for line in (*rest, *notes):
        out.print(Text(line))


def end(status: str) -> None:
    """After a job's summary: a budget stop (the one rule, :mod:`rubricforge.jobs.base`) says so and exits
    :data:`~rubricforge.jobs.base.STOPPED_EXIT`; the finished work is already written out."""
    from rubricforge.jobs.base import STOPPED_EXIT

    if status.startswith("stopped"):
        console().print(f"{status}; finished work is kept and written out: run the same command with a larger "
                        "budget to resume", style="yellow", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(STOPPED_EXIT)
