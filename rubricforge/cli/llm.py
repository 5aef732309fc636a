"""`rubricforge llm`: check the configured models."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rubricforge.cli.common import ConfigOpt, SetOpt, cli_config
from rubricforge.errors import RunFailed

app = typer.Typer(no_args_is_help=True, help="Check the configured models.")


@app.command("check")
def llm_check(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    role: Annotated[Optional[list[str]], typer.Option("--role", "-r", help="generator | verifier | judge (default: all)")] = None,
) -> None:
    """Print each role's backend and model and one structured test completion; exit 1 if a role failed."""
    import asyncio

    from rubricforge.llm.check import check_roles

    cfg = cli_config(config, set_)
    roles = role or ["generator", "verifier", "judge"]
    lines, failed = asyncio.run(check_roles(cfg, roles))
    for line in lines:
        typer.echo(line)
    if failed:
        raise RunFailed(f"{len(failed)} of {len(roles)} roles gave no valid answer ({', '.join(failed)}); see above")
