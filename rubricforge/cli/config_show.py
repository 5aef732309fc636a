"""`rubricforge config`: the resolved configuration."""

from __future__ import annotations

import typer

from rubricforge.cli.common import ConfigOpt, SetOpt, cli_config


def config_show(config: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Print the resolved configuration (defaults < file < environment < --set)."""
    import yaml

    typer.echo(yaml.safe_dump(cli_config(config, set_).public_dict(), sort_keys=False))
