"""The command line: the root app, its command groups (one module each) and :func:`main`. Thin: parse, load
the config, call a job (or flow), print a summary.

Heavy modules (torch, faiss, llama_cpp, litellm, datasets) are imported inside the commands, so
``rubricforge --help`` answers at once. Shared options and console helpers are in :mod:`rubricforge.cli.common`.
"""

from __future__ import annotations

import sys

import typer

from rubricforge.cli import (build, config_show, convert, corpus, evaluate, judge, llm, prefs, rewards, rollouts, rubrics,
                             train)
from rubricforge.cli.common import cli_config
from rubricforge.errors import RunFailed, UserError

__all__ = ["app", "cli_config", "main"]

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Build evidence-grounded query–rubric datasets, rewards and RL runs for deep-research agents.")
app.command("build")(build.build)
app.command("view")(build.view)
app.command("convert")(convert.convert)
app.command("config")(config_show.config_show)
for name, group in (("corpus", corpus), ("llm", llm), ("reward", rewards), ("train", train), ("rollouts", rollouts),
                    ("prefs", prefs), ("rubrics", rubrics), ("eval", evaluate), ("judge", judge)):
    app.add_typer(group.app, name=name)


def _cli_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(aborts, usage errors) of click and of the copy of click that typer >= 0.26 ships."""
    import click

    aborts: list[type[BaseException]] = [click.exceptions.Abort, typer.Abort]
    usage: list[type[BaseException]] = [click.ClickException]
    try:
        from typer._click.exceptions import ClickException
    except ImportError:
        pass
    else:
        usage.append(ClickException)
    return tuple(aborts), tuple(usage)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2."""
    aborts, usage_errors = _cli_errors()
    interrupts: tuple[type[BaseException], ...] = (KeyboardInterrupt, *aborts)
    try:
        app(standalone_mode=False)
    except UserError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
    except RunFailed as err:
        typer.echo(f"failed: {err}", err=True)
        sys.exit(1)
    except interrupts:
        typer.echo("interrupted: finished work is kept; run the same command again to resume", err=True)
        sys.exit(130)
    except usage_errors as err:
        err.show()  # type: ignore[attr-defined]  # every usage error is a ClickException (click's or typer's copy)
        sys.exit(2)
