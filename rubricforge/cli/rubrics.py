"""`rubricforge rubrics`: measure rubric sources against preference pairs; generate rubrics for a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import ConfigOpt, DatasetOpt, QuietOpt, SetOpt, console, finish, cli_config, table

app = typer.Typer(no_args_is_help=True, help="Measure rubric sources against preference pairs; generate rubrics.")


@app.command("eval")
def rubrics_eval(
    pairs: Annotated[Path, typer.Option("--pairs", "-p", help="Pairs JSONL (prefs import / prefs degrade).")],
    source: Annotated[str, typer.Option("--source", help="Comma-separated rubric sources: general, generated, "
                                                         "closed-book, search, race, tree; and the judge baselines "
                                                         "pointwise, pairwise (Prefs Table 1).")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Results go to <run-dir>/rubric-eval/.")] = None,
    split: Annotated[Optional[str], typer.Option(help="Only this split (train | validation | test).")] = None,
    race_rubrics: Annotated[Optional[Path], typer.Option(help="RACE rubrics per query for --source race "
                                                              "(e.g. DRB's criteria.jsonl).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="For --source tree: the rubricforge dataset the queries "
                                                         "came from.")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Preference accuracy and paired Cohen's d of each rubric source (Prefs Table 1), resumable."""
    from rubricforge.jobs.rubric_eval import TABLE_HEADER, evaluate_rubrics, table_rows

    sources = [s.strip() for s in source.split(",") if s.strip()]
    result = evaluate_rubrics(cli_config(config, set_, run_dir=run_dir), pairs, sources, split, race_rubrics, dataset,
                      progress=not quiet)
    rows = table(*TABLE_HEADER)
    for row in table_rows(result.summary):
        rows.add_row(*row)
    console().print(rows)
    finish(result)


@app.command("generate")
def rubrics_generate(
    dataset: DatasetOpt,
    out: Annotated[Path, typer.Option("--out", help="Dataset JSONL with the generated 'rubrics' column.")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Rubrics for every question by the generator role (prompt C.1), for `train grpo --set train.reward=pref_rubric`."""
    from rubricforge.jobs.rubric_generate import generate_dataset_rubrics

    finish(generate_dataset_rubrics(cli_config(config, set_), dataset, out, progress=not quiet))
