"""`rubricforge convert`: rows between rubricforge and the other rubric / RL data formats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import console


def convert(
    src: Annotated[Path, typer.Argument(help="Input: .jsonl, .json, .parquet, or a dataset folder / run directory.")],
    dst: Annotated[Path, typer.Argument(help="Output file (.jsonl, .json or .parquet).")],
    to: Annotated[str, typer.Option("--to", help="Output format (see below).")] = "rubricforge",
    from_: Annotated[Optional[str], typer.Option("--from", help="Input format (default: detected).")] = None,
    rejects: Annotated[Optional[Path], typer.Option(help="Rejected records (default: <dst>.rejects.jsonl).")] = None,
    source: Annotated[str, typer.Option(help="The dataset name written where a format has one (DR Tulu source, "
                                             "verl data_source).")] = "rubricforge",
) -> None:
    """Convert between rubricforge's rows and DR Tulu, open-instruct, DeepRubric, RaR, DRB criteria, ResearchQA,
    HealthBench, RubricHub, ResearchRubrics, verl, verl-rubric and TRL rows; records that cannot convert are
    skipped, counted and written to a rejects file.

    Formats: rubricforge, drtulu, openinstruct, deeprubric, rar, drb, researchqa, healthbench, rubrichub,
    researchrubrics, verl, verlrubric, trl."""
    from rubricforge.export.convert import convert_file

    got, rej = convert_file(src, dst, to, from_, rejects, source)
    say = console()
    say.print(f"[green]converted[/green] {got.converted} of {got.read} records {got.source_format or '?'} -> "
              f"{got.target_format}: {dst}")
    if rej["total"]:
        reasons = "; ".join(f"{n} {r}" for r, n in sorted(rej["by_reason"].items(), key=lambda x: -x[1]))
        say.print(f"[yellow]skipped {rej['total']}[/yellow] ({reasons}): {rej['file']}", markup=True, highlight=False)
