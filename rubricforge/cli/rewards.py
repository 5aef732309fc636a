"""`rubricforge reward`: score responses with the rewards; audit the judge."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import ConfigOpt, DatasetOpt, QuietOpt, SetOpt, console, finish, fmt, cli_config, table

app = typer.Typer(no_args_is_help=True, help="Score agent responses with rubricforge's rewards; audit the judge.")
ResponsesOpt = Annotated[Path, typer.Option("--responses", "-r", help='JSONL of {"id", "response", "snippets"?}.')]


@app.command("score")
def reward_score(
    dataset: DatasetOpt,
    responses: ResponsesOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    rewards: Annotated[str, typer.Option(help="Comma-separated rewards, or a group: deeprubric | report | search_rl "
                                              "| all (plugins' rewards and groups too).")] = "deeprubric",
    out: Annotated[Optional[Path], typer.Option(help="Output JSONL (default: <responses>.scores.jsonl).")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Score each response against its example: a per-component JSONL and a summary table (resumable)."""
    from rubricforge.jobs.reward_score import score_responses
    from rubricforge.rewards.registry import groups

    names = groups().get(rewards) or tuple(n.strip() for n in rewards.split(",") if n.strip())
    result = score_responses(cli_config(config, set_), dataset, responses, names, out, progress=not quiet)
    rows = table("reward", "mean", "min", "max", "scored", "unscored")
    for name, s in result.summary.rewards.items():
        rows.add_row(name, *(fmt(s[k]) for k in ("mean", "min", "max")), str(s["scored"]), str(s["unscored"]))
    console().print(rows)
    finish(result)


@app.command("audit")
def reward_audit(
    dataset: DatasetOpt,
    responses: ResponsesOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    repeats: Annotated[int, typer.Option(min=2, help="Independent samples of the judge per criterion.")] = 3,
    second_judge: Annotated[str, typer.Option(help="The LLM role compared with the judge.")] = "verifier",
    out: Annotated[Optional[Path], typer.Option(help="Write the full report (JSON) here (default: report.json in "
                                                "the run directory <responses>.audit.run/).")] = None,
) -> None:
    """Score the same responses several times and with two judges; print variance and agreement (resumable)."""
    from rubricforge.jobs.reward_audit import audit_rewards

    result = audit_rewards(cli_config(config, set_), dataset, responses, repeats, second_judge, out)
    rows = table("comparison", "pairs", "exact", "kappa (quadratic)", "spearman")
    for name, a in result.summary.agreement.items():
        rows.add_row(name, str(a["pairs"]), fmt(a["exact"]), fmt(a["kappa_quadratic"]), fmt(a["spearman"]))
    console().print(rows)
    finish(result)
