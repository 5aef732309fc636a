"""`rubricforge reward`: score responses with the rewards; probe a reward for gaming. (``reward audit`` is now
``judge agreement``: the old name works for one release.)"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import (ConfigOpt, DatasetOpt, QuietOpt, ResponsesOpt, SetOpt, cli_config, console,
                                    deprecated, finish, fmt, table)
from rubricforge.cli.judge import judge_agreement

app = typer.Typer(no_args_is_help=True,
                  help="Score agent responses with rubricforge's rewards; probe a reward for gaming.")


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


app.command("audit", hidden=True)(deprecated(judge_agreement, "reward audit", "judge agreement"))


@app.command("probe")
def reward_probe(
    dataset: DatasetOpt,
    responses: Annotated[Optional[Path], typer.Option("--responses", "-r", help='JSONL of honest responses: {"id", '
                         '"response", "snippets"?} (as `reward score` reads); default: each row\'s reference answer '
                         'made from its factual evidence.')] = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    rewards: Annotated[str, typer.Option(help="Comma-separated rewards, or a group: deeprubric | report | search_rl "
                                              "| all.")] = "format",
    probes: Annotated[Optional[str], typer.Option(help="Comma-separated probes (default: all of them).")] = None,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="A probe fails when its variant scores at least "
                                             "the honest response on more than this share of items.")] = 0.2,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Probe only the first N responses.")] = None,
    run_dir: Annotated[Optional[Path], typer.Option(help="Run directory (default: <responses>.probe.run/, or "
                                                    "<dataset>.probe.run/).")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Score adversarial variants of honest responses (rubric pasted in, keyword stuffing, padding, wrong facts, tag
    soup, citation spam, empty, refusal, criteria reordered); exit 4 naming each probe that wins too often."""
    from rubricforge.jobs.reward_probe import PROBE_EXIT, probe_rewards
    from rubricforge.rewards.probes import PROBES
    from rubricforge.rewards.registry import GROUPS

    names = GROUPS.get(rewards) or tuple(n.strip() for n in rewards.split(",") if n.strip())
    chosen = tuple(p.strip() for p in probes.split(",") if p.strip()) if probes else PROBES
    say = console()
    result = probe_rewards(cli_config(config, set_), dataset, responses, names, chosen, threshold, run_dir, limit,
                           announce=lambda line: say.print(line, markup=False, highlight=False, soft_wrap=True),
                           progress=not quiet)
    results = result.summary.results
    typed = any(got["per_criterion"] for by_probe in results.values() for got in by_probe.values())
    rows = table("reward", "probe", "n", "wins", "95% CI", "strict", "mean Δ", *(["per criterion type"] if typed else []))
    for name, by_probe in results.items():
        for probe, got in by_probe.items():
            ci = f"{fmt(got['ci_low'])}–{fmt(got['ci_high'])}" if got["ci_low"] is not None else "-"
            kinds = [", ".join(f"{k} {fmt(c['share'])}" for k, c in got["per_criterion"].items())] if typed else []
            rows.add_row(name, probe, str(got["items"]), fmt(got["share"]), ci, fmt(got["strict"]),
                         fmt(got["mean_delta"]), *kinds)
    say.print(rows)
    finish(result)
    if result.summary.failed:
        raise SystemExit(PROBE_EXIT)
