"""`rubricforge judge`: check the configured LLM judge — against human labels (``audit``), and against itself and a
second judge (``agreement``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import (ConfigOpt, DatasetOpt, QuietOpt, ResponsesOpt, SetOpt, cli_config, console,
                                    finish, fmt, table)

app = typer.Typer(no_args_is_help=True, help="Check the LLM judge: against human labels (balanced accuracy per rubric "
                                             "category, per-call vs batched judging) and its agreement with itself "
                                             "and a second judge.")


@app.command("audit")
def judge_audit(
    labels: Annotated[Path, typer.Option("--labels", "-l", help='Human labels, RuVerBench\'s fields joined per report: '
                                         'JSONL (or a JSON list) of {"id", "question", "response", "rubric": '
                                         '[{"point", "covered", "category"}]}.')],
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Run directory (default: runs/judge-audit/"
                                                    "<labels file name>).")] = None,
    covered_at: Annotated[int, typer.Option(min=1, max=4, help="A point is covered when the judge scores it at "
                                            "least this (0–4 scale).")] = 3,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Judge every labelled report one rubric point per call and all points in one call; print balanced accuracy
    per rubric category for both, the difference, and the calls and tokens each took (resumable: run it again)."""
    from rubricforge.jobs.judge_audit import MODES, audit_judge

    result = audit_judge(cli_config(config, set_), labels, run_dir or Path("runs/judge-audit") / labels.stem,
                         covered_at, progress=not quiet)
    s = result.summary
    one, batched = (s.modes[m] for m in MODES)
    rows = table("category", "points", "covered", "per call", "batched", "Δ batched")
    for name, v in one["categories"].items():
        rows.add_row(name, str(v["n"]), str(v["covered"]), fmt(v["balanced_accuracy"]),
                     fmt(batched["categories"][name]["balanced_accuracy"]), fmt(s.delta["categories"][name]))
    rows.add_row("all points", str(one["overall"]["n"]), str(one["overall"]["covered"]),
                 fmt(one["overall"]["balanced_accuracy"]), fmt(batched["overall"]["balanced_accuracy"]),
                 fmt(s.delta["overall"]))
    rows.add_row("category mean", "", "", fmt(one["macro"]), fmt(batched["macro"]), fmt(s.delta["macro"]))
    console().print(rows)
    finish(result)


@app.command("agreement")
def judge_agreement(
    dataset: DatasetOpt,
    responses: ResponsesOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    repeats: Annotated[int, typer.Option(min=2, help="Independent samples of the judge per criterion.")] = 3,
    second_judge: Annotated[str, typer.Option(help="The LLM role compared with the judge.")] = "verifier",
    out: Annotated[Optional[Path], typer.Option(help="Write the full report (JSON) here (default: report.json in "
                                                "the run directory <responses>.audit.run/).")] = None,
) -> None:
    """Score the same responses several times and with two judges; print the judge's agreement with itself and with
    the second judge (resumable; formerly `reward audit`)."""
    from rubricforge.jobs.reward_audit import audit_rewards

    result = audit_rewards(cli_config(config, set_), dataset, responses, repeats, second_judge, out)
    rows = table("comparison", "pairs", "exact", "kappa (quadratic)", "spearman")
    for name, a in result.summary.agreement.items():
        rows.add_row(name, str(a["pairs"]), fmt(a["exact"]), fmt(a["kappa_quadratic"]), fmt(a["spearman"]))
    console().print(rows)
    finish(result)
