"""`rubricforge build` (the evidence-tree, KG and Report-RL datasets) and `rubricforge view`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional, cast

import typer

from rubricforge.cli.common import ConfigOpt, QuietOpt, SetOpt, VerboseOpt, cli_config, finish
from rubricforge.errors import UserError

if TYPE_CHECKING:
    from rubricforge.config import Config

RunnerOpt = Annotated[Optional[str], typer.Option("--runner", help="Where the Prefect tasks run: threads | processes | dask | ray "
                                                   "(runner.kind).")]
AddressOpt = Annotated[Optional[str], typer.Option("--address", help="Dask scheduler (tcp://host:8786) or Ray cluster "
                                                    "(ray://host:10001); default: a local one.")]
WorkersOpt = Annotated[Optional[int], typer.Option("--workers", help="Threads, processes or local workers.")]
ExecutorOpt = Annotated[str, typer.Option("--executor", help="prefect (the job's Prefect flow, its Prefect tasks on --runner) | "
                                          "local (this process, no Prefect); --source tree and kg.")]
STRONGER_MODEL = ("stronger model: --set llm.generator.backend=litellm --set llm.generator.model=openai/gpt-4o-mini "
                  "(likewise llm.verifier), or a vLLM server: --set llm.generator.model=hosted_vllm/<model> "
                  "--set llm.generator.api_base=http://host:8000/v1")


def build(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Run directory (default: runs/default).")] = None,
    n_trees: Annotated[Optional[int], typer.Option("--n-trees", help="Evidence trees to build at least.")] = None,
    rows: Annotated[Optional[int], typer.Option("--rows", help="Keep building trees until this many rows are "
                                                "retained (build.target_rows; at most build.max_trees trees).")] = None,
    rubric_source: Annotated[Optional[str], typer.Option(
        "--rubric-source", help="tree (DeepRubric) | closed-book | search (the §4.4 ablation baselines).")] = None,
    push_to_hub: Annotated[Optional[str], typer.Option("--push-to-hub", help="Push the dataset to this Hub repo "
                                                        "(token from HF_TOKEN).")] = None,
    quiet: QuietOpt = False,
    runner: RunnerOpt = None,
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    executor: ExecutorOpt = "prefect",
    verbose: VerboseOpt = False,
    source: Annotated[str, typer.Option("--source", help="tree (evidence trees) | kg (knowledge-graph multi-hop "
                                                         "questions; default run dir runs/kg) | report (Report-RL "
                                                         "rows from --queries).")] = "tree",
    queries: Annotated[Optional[Path], typer.Option(help="--source report: JSONL of {id, query} (or DRB's "
                                                         "{id, prompt}).")] = None,
    race_rubrics: Annotated[Optional[Path], typer.Option(help="--source report: RACE rubrics per query (e.g. DRB's "
                                                              "criteria.jsonl); others are generated.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="--source report: only the first N queries.")] = None,
    form: Annotated[str, typer.Option(help="--source report: short (App. 8.2 reference report) | long (a teacher "
                                           "trajectory with the tools: report, retrieval data, outline) | both.")] = "short",
    tool_budget: Annotated[int, typer.Option(help="--source report --form long: tool calls per teacher trajectory "
                                                  "(MaMs C.5, default 10).")] = 10,
) -> None:
    """Build the evidence-tree query–rubric dataset, with --source kg the knowledge-graph multi-hop one, or with
    --source report Report-RL rows (RACE rubrics + reference report) for --queries (resumable: run it again).

    Runs the ``build_dataset`` (``build_kg_dataset``) Prefect flow (Prefect's temporary server unless
    PREFECT_API_URL is set), or with --executor local the same job in this process."""
    cfg = cli_config(config, set_, run_dir=run_dir, **{"build.n_trees": n_trees, "build.target_rows": rows,
                                                        "build.rubric_source": rubric_source, "runner.kind": runner,
                                                        "runner.address": address, "runner.workers": workers})
    if source not in ("tree", "kg", "report"):
        raise UserError(f"unknown --source '{source}'", "use --source tree, kg or report")
    if source == "report":
        _report_rows(cfg, queries, race_rubrics, limit, form, tool_budget, quiet)
        return
    from rubricforge.api import Executor, run_job

    result = run_job(source, cfg, cast(Executor, executor), progress=not quiet, push_to_hub=push_to_hub,
                     verbose=verbose)  # an unknown executor: a UserError there
    notes = [f"open the viewer in a browser; rebuild it with `rubricforge view {result.summary.run_dir}`",
             *([STRONGER_MODEL] if cfg.llm.generator.backend == "local" else [])]
    finish(result, notes if source == "tree" else [])


def _report_rows(cfg: Config, queries: Path | None, race_rubrics: Path | None, limit: int | None, form: str,
                 tool_budget: int, quiet: bool) -> None:
    """``build --source report``: Report-RL rows for ``queries``."""
    from rubricforge.agent.mams import MamsConfig
    from rubricforge.jobs.report_data import build_report_data

    if queries is None:
        raise UserError("--source report needs --queries", "pass a JSONL of {id, query}")
    forms = ("short", "long") if form == "both" else (form,)
    finish(build_report_data(cfg, queries, race_rubrics, limit, progress=not quiet, forms=forms,
                             mams=MamsConfig(tool_budget=tool_budget)))


def view(run_dir: Annotated[Path, typer.Argument(help="A run directory written by `rubricforge build`.")]) -> None:
    """Write the run's static HTML viewer (trees, questions, rubrics, verdicts) and print its path."""
    from rubricforge.export import write_viewer

    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} not found", "pass the folder `rubricforge build` wrote (runs/<name>)")
    typer.echo(write_viewer(run_dir))
