"""`rubricforge rollouts`: run a model with the tools over dataset questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.cli.common import ConfigOpt, DatasetOpt, ModelOpt, SetOpt, cli_config, finish

app = typer.Typer(no_args_is_help=True, help="Run a model with the tools over dataset questions.")


@app.command("sample")
def rollouts_sample(
    dataset: DatasetOpt,
    model: ModelOpt,
    out: Annotated[Path, typer.Option("--out", help="Trajectories JSONL (appended; a re-run resumes).")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    n: Annotated[Optional[int], typer.Option("--n", help="Trajectories per question (train.rollouts_per_prompt).")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N questions.")] = None,
    workflow: Annotated[str, typer.Option(help="react (the App. D agent) | mams (Prefs' search / state / "
                                               "report agents).")] = "react",
) -> None:
    """Answer dataset questions with a model and the tools; write trajectories for SFT, DPO or reward audits."""
    from rubricforge.jobs.rollouts import sample_rollouts
    from rubricforge.training.rollouts import Sampler

    cfg = cli_config(config, set_, **{"train.rollouts_per_prompt": n})
    finish(sample_rollouts(cfg, dataset, out, lambda: Sampler(model, cfg), limit, progress=True, workflow=workflow))
