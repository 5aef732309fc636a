"""What every command group shares: the common options, the config from ``--config`` / ``--set`` / flags, the
console helpers (tables, numbers) and how a job's command ends (:func:`finish`: its result's lines, the exit code)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from rubricforge.text import fmt as fmt  # the commands' number format

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
ResponsesOpt = Annotated[Path, typer.Option("--responses", "-r", help='JSONL of {"id", "response", "snippets"?}.')]


def deprecated(command: Callable[..., None], old: str, new: str) -> Callable[..., None]:
    """``command`` under its old name ``old``, for one release: it says so in one line on stderr, then runs."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        typer.echo(f"deprecated: `rubricforge {old}` is now `rubricforge {new}`; the old name goes in the next release",
                   err=True)
        command(*args, **kwargs)

    run.__doc__ = f"Deprecated: `rubricforge {new}` (this name goes in the next release)."
    return run


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


def finish(result: JobResult, notes: Sequence[str] = ()) -> None:
    """How every job's command ends (the one ending rule, :mod:`rubricforge.jobs.base`): the result's
    :meth:`~rubricforge.jobs.base.JobResult.lines` (the line that starts with its status word coloured by it), its
    summary's warnings, then ``notes``; a job that is not ``complete`` then says why with what to do — after a budget
    stop exit :data:`~rubricforge.jobs.base.STOPPED_EXIT`, with items not done (unscored, failed) exit
    :data:`~rubricforge.jobs.base.INCOMPLETE_EXIT` — the finished work already written out."""
    from rich.text import Text

    from rubricforge.jobs.base import RETRY, exit_code

    status, out = result.status, console()
    word = status.split(":", 1)[0]
    style = "green" if status == "complete" else "yellow"
    for line in result.lines():
        text = Text(word, style=style) + Text(line.removeprefix(word)) if line.startswith(word) else Text(line)
        out.print(text, soft_wrap=True)
    for warning in getattr(result.summary, "warnings", []):
        out.print(Text("warning:", style="yellow") + Text(f" {warning}"), soft_wrap=True)
    for line in notes:
        out.print(Text(line), soft_wrap=True)
    if (code := exit_code(status)) == 0:
        return
    then = ("finished work is kept and written out: run the same command with a larger budget to resume"
            if status.startswith("stopped") else RETRY)
    out.print(f"{status}; {then}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    raise SystemExit(code)
