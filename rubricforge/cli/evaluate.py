"""`rubricforge eval`: score reports on a task set with confidence intervals; `eval compare`: two runs, paired."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import ConfigOpt, QuietOpt, SetOpt, console, finish, fmt, cli_config, table
from rubricforge.errors import UserError

app = typer.Typer(no_args_is_help=True, invoke_without_command=True,
                  help="Run an agent on a task set or read its reports, score them (RACE, rubric judge, exact "
                       "answer, citations, format) with bootstrap CIs and an HTML report; compare two runs.")
ResamplesOpt = Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")]
SeedOpt = Annotated[int, typer.Option(help="Bootstrap seed.")]


@app.callback()
def eval_run(
    ctx: typer.Context,
    tasks: Annotated[Optional[Path], typer.Option("--tasks", "-t", help="Task set: a rubricforge dataset (folder, "
                                                  ".jsonl, .parquet), DRB's criteria.jsonl, or a format `rubricforge "
                                                  "convert` reads.")] = None,
    reports: Annotated[Optional[Path], typer.Option("--reports", "-r", help='JSONL of DRB\'s {"id", "prompt", '
                                                    '"article"} or {"id", "response"}.')] = None,
    agent: Annotated[Optional[str], typer.Option("--agent", "-a", help="Run this agent over the tasks instead of "
                                                 "--reports: a YAML file or key=value pairs (model=<embedded model | "
                                                 "litellm model | checkpoint folder>, backend, api_base, tools, "
                                                 "workflow, max_tokens, ...), or 'default' (the embedded model "
                                                 "with the tools).")] = None,
    split: Annotated[Optional[str], typer.Option(help="Only the task rows of this split (their 'split' "
                                                 "column).")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Only the first N tasks.")] = None,
    references: Annotated[Optional[Path], typer.Option(help="Reference reports in the same layout: RACE becomes "
                                                       "reference-relative (else the row's reference_report, else "
                                                       "pointwise 0–10).")] = None,
    scorers: Annotated[Optional[str], typer.Option(help="Comma-separated: race, rubric, exact, equivalence (the "
                                                   "LLM judge of the final answer), citation (FACT against the "
                                                   "corpus index), format, healthbench (HealthBench's score), "
                                                   "coverage (ResearchQA's rubric coverage), drb2 (DeepResearch Bench "
                                                   "II's binary rubrics) (default: the preset's, else exact for rows "
                                                   "with an answer, else race, else rubric).")] = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Run directory (default: runs/eval/<reports "
                                                    "file name, or the agent's model>).")] = None,
    preset: Annotated[Optional[str], typer.Option(help="A leaderboard's official evaluator (eval.preset): drb "
                                                  "(DeepResearch Bench: RACE by GPT-5.5 with DRB's prompts, against "
                                                  "--references) | drb2 (DeepResearch Bench II: binary rubrics by "
                                                  "GPT-5.5, 50 a call). What you set yourself wins, and a run that "
                                                  "differs is labelled not comparable with the leaderboard.")] = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    resamples: ResamplesOpt = 2000,
    seed: SeedOpt = 0,
    quiet: QuietOpt = False,
) -> None:
    """Score --reports, or run --agent and score its reports, on --tasks into a run directory: per-task JSONL,
    summary.json with bootstrap 95% CIs per scorer and dimension, report.html (resumable: run it again)."""
    if ctx.invoked_subcommand is not None:
        return
    if tasks is None or (reports is None) == (agent is None):
        raise UserError("rubricforge eval needs --tasks and one of --reports or --agent", "e.g. rubricforge eval "
                        "--tasks criteria.jsonl --reports system.jsonl, or --tasks dataset/ --agent default")
    from rubricforge.evaluation.presets import PRESETS
    from rubricforge.jobs.evaluate import evaluate
    from rubricforge.training.rollouts import Sampler

    if preset is not None and preset not in PRESETS:
        raise UserError(f"unknown preset '{preset}'", f"use --preset {' or --preset '.join(PRESETS)}")

    say = console()
    agent_cfg = None
    if agent is not None:
        from rubricforge.evaluation.agents import load_agent_config

        agent_cfg = load_agent_config(agent)
    asked = [s.strip() for s in (scorers or "").split(",") if s.strip()]
    folder = run_dir or Path("runs/eval") / (reports.stem if reports else Path(agent_cfg.model).name)  # type: ignore[union-attr]
    result = evaluate(cli_config(config, set_, **{"eval.preset": preset}), tasks, reports, folder, references, asked, resamples, seed,
                      progress=not quiet, agent=agent_cfg, split=split, limit=limit, sampler=Sampler,
                      announce=lambda line: say.print(line, markup=False, highlight=False, soft_wrap=True))
    rows = table("metric", "n", "unscored", "mean", "95% CI")
    for name, m in result.summary.metrics.items():
        rows.add_row(name, str(m["n"]), str(m["unscored"]), fmt(m["mean"]),
                     f"[{fmt(m['ci_low'])}, {fmt(m['ci_high'])}]")
    say.print(rows)
    finish(result)


@app.command("compare")
def eval_compare(
    run_a: Annotated[Path, typer.Argument(help="The baseline run directory (A).")],
    run_b: Annotated[Path, typer.Argument(help="The run compared with it (B).")],
    out: Annotated[Optional[Path], typer.Option(help="Folder for compare.json and compare.html (default: "
                                                "<RUN_B>/compare-<RUN_A name>).")] = None,
    resamples: ResamplesOpt = 2000,
    seed: SeedOpt = 0,
) -> None:
    """B against A over the tasks both scored: paired difference with its bootstrap 95% CI, win / tie / loss and
    the sign test, per metric."""
    from rubricforge.jobs.evaluate import compare

    result = compare(run_a, run_b, out, resamples, seed)
    rows = table("metric", "tasks", "A", "B", "B − A", "95% CI", "W/T/L", "sign p")
    for name, p in result["metrics"].items():
        rows.add_row(name, str(p["n"]), fmt(p["mean_a"]), fmt(p["mean_b"]), fmt(p["diff"]),
                     f"[{fmt(p['ci_low'])}, {fmt(p['ci_high'])}]", f"{p['wins']}/{p['ties']}/{p['losses']}",
                     fmt(p["sign_p"]))
    say = console()
    say.print(rows)
    from rubricforge.evaluation.report import leaderboard

    for side, run in (("A", run_a), ("B", run_b)):
        if label := result["leaderboard"][side]:
            say.print(f"{side} ({run}): {leaderboard(label)}", markup=False, highlight=False, soft_wrap=True)
    say.print(f"report: {result['out']}/compare.html", markup=False, highlight=False, soft_wrap=True)
