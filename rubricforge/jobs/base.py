"""What every job shares: the config resolved on the driver, how a job (or one of its tasks) ended, and
one result type.

A job's status is ``complete``, ``incomplete: <n> of <m> ...``, ``stopped: <why>``, ``failed: <why>`` or
``interrupted``; :func:`ending` writes it to the run directory's manifest, and the flows ask :func:`retryable`
before retrying a task.

The one ending rule, the same for every job (:func:`exit_code` maps a status to the CLI's exit code):

* ``complete`` (exit 0) only when every item the job set out to score or build is done;
* ``incomplete: <n> of <m> <items> ...`` (exit :data:`INCOMPLETE_EXIT`) when some are not — a judge left them
  unscored, their calls failed, they could not be made: what is finished is kept and written out, and the
  same command retries exactly the rest (the build's :class:`~rubricforge.errors.ItemsFailed` exits 1 too);
* ``stopped: <why>`` (exit :data:`STOPPED_EXIT`) when the LLM budget is spent: the job stops starting work,
  keeps and exports (writes out) everything it finished — not an error — and the same command with a larger
  budget resumes where it stopped;
* bad input or configuration: one line and exit 2, before any work where it can be seen then.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import BudgetExceeded, ItemsFailed, UserError
from rubricforge.rundir import RunDir

STOPPED_EXIT = 3  # the CLI's exit code after a budget stop: not 0 (the output is partial), not a failure (1, 2)
INCOMPLETE_EXIT = 1  # the CLI's exit code when items are not done (unscored, failed): re-run to retry them
RETRY = "finished work is kept and written out: re-run the same command to retry them"


def incomplete(undone: int, total: int, what: str) -> str:
    """The status of a job that left ``undone`` of its ``total`` items not done, e.g. ``incomplete: 36 of 100
    tasks unscored`` (``what``: the items and what they lack, "tasks unscored")."""
    return f"incomplete: {undone} of {total} {what}"


def exit_code(status: str) -> int:
    """The CLI's exit code for a job's status (the one ending rule of this module)."""
    if status.startswith("stopped"):
        return STOPPED_EXIT
    return 0 if status == "complete" else INCOMPLETE_EXIT


@dataclass
class JobResult:
    """What every job returns: how it ended, where its output and run directory are, its own summary (the
    payload: ``BuildSummary``, ``RewardScoreSummary``, ...; its ``lines()`` say what the job did) and, for a dataset
    export, its rows, viewer and Hub repo."""

    status: str  # complete | stopped: <why>
    out: str  # the job's output: the dataset folder, the JSONL written, the results folder
    run_dir: str  # its run directory: manifest.json, config.yaml, ledgers/
    summary: Any
    rows: int | None = None  # rows in the exported dataset
    viewer: str | None = None
    pushed_to: str | None = None

    def lines(self) -> list[str]:
        """What the CLI prints."""
        export = [f"dataset: {self.out}" + (f"  (pushed to {self.pushed_to})" if self.pushed_to else ""),
                  f"viewer:  {self.viewer}"] if self.viewer is not None else []
        return [*self.summary.lines(), *export]


def job_result(summary: Any, out: str | Path, run_dir: str | Path | RunDir) -> JobResult:
    """The result of a job whose ``summary`` has a ``status``."""
    path = run_dir.path if isinstance(run_dir, RunDir) else run_dir
    return JobResult(summary.status, str(out), str(path), summary)


def exported(run_dir: RunDir, summary: Any, export: dict[str, Any], viewer: str | Path) -> JobResult:
    """The result of a dataset job from its export (``path``, ``n_examples``, ``pushed_to``), also recorded in the
    manifest (``summary``: the stages' summary, its ``rows`` set here; None for the partial export of a failed
    run)."""
    rows = int(export["n_examples"])
    if summary is not None:
        summary.rows = rows
    done = JobResult(summary.status if summary is not None else "failed", str(export["path"]), str(run_dir.path),
                     summary, rows, str(viewer), export.get("pushed_to"))
    run_dir.record_export(done.out, str(viewer), rows)
    return done


@contextlib.contextmanager
def partial_export(export: Callable[[], JobResult]) -> Iterator[None]:
    """Around a job's stages: when they end with ItemsFailed, ``export()`` the rows they finished (the card and
    the manifest mark them partial, as the manifest says the run failed; nothing is pushed) and raise
    ItemsFailed saying where they went, so they can be looked at before the re-run."""
    try:
        yield
    except ItemsFailed as failure:
        result = export()
        raise ItemsFailed(failure.errors, exported=f"the {result.rows} finished row(s) are exported, marked "
                                                   f"partial: {result.out}") from None


def on_driver(cfg: Config) -> Config:
    """``cfg`` with every path a worker opens made absolute here, on the driver, so workers need not share its
    working directory or HOME: the run directory, the corpus indexes, the LLM cache, model and replay files."""
    def absolute(path: str | None) -> str | None:
        return os.path.abspath(os.path.expanduser(path)) if path else path

    llm, tools = cfg.llm, cfg.tools
    return cfg.model_copy(update={
        "run_dir": absolute(cfg.run_dir),
        "tools": tools.model_copy(update={"index_dir": absolute(str(cfg.index_dir()) if not tools.server_url else
                                                                 tools.index_dir),
                                          "scholar_index_dir": absolute(tools.scholar_index_dir)}),
        "llm": llm.model_copy(update={name: absolute(getattr(llm, name))
                                      for name in ("cache_path", "model_dir", "replay_path", "record_path")})})


BUILD_ROLES = ("generator", "verifier")  # the LLM roles the tree and KG builds call


def preflight(cfg: Config, roles: Sequence[str], run_dir: str, push_to_hub: str | None = None) -> None:
    """A job's configuration mistakes end here, before any work (a UserError): the Hub repo and token (the one
    check of a push: the job's export then only reads the token, :func:`push_token`), the run directory, a
    mistyped index folder, the LLM ``roles`` (cache path, keys, models, api_base;
    :func:`rubricforge.llm.check.preflight_roles`). ``cfg`` as the user gave it (not yet :func:`on_driver`'s)."""
    from rubricforge.export.hub import check_push
    from rubricforge.io.files import check_writable_dir
    from rubricforge.llm.check import preflight_roles

    if push_to_hub is not None:
        check_push(push_to_hub)
    check_writable_dir(run_dir, "run directory", "--run-dir (or --set run_dir=...)")
    index_dir = cfg.tools.index_dir
    if index_dir and cfg.corpus.source == "default" and not Path(index_dir).exists():
        raise UserError(f"tools.index_dir {index_dir} does not exist (and corpus.source is the default corpus)",
                        "fix the path, or build an index there first: rubricforge corpus build --out "
                        f"{index_dir} [--source ... --path ...]")
    preflight_roles(cfg.llm, list(roles))


def push_token(push_to_hub: str | None) -> str | None:
    """The Hub token of a push the job's :func:`preflight` checked (None: no push), for the export."""
    from rubricforge.export.hub import hub_token

    return hub_token() if push_to_hub is not None else None


# ---------------------------------------------------------------- how a job ends


def status_of(error: BaseException | None) -> str:
    """The status a job or a task ended with, given what it raised (None: nothing)."""
    if error is None:
        return "complete"
    if isinstance(error, BudgetExceeded):
        return f"stopped: {error}"
    if isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)):
        return "interrupted"
    return f"failed: {type(error).__name__}: {error}"


def retryable(error: BaseException | None) -> bool:
    """Whether a task that raised ``error`` gets another attempt: not after a budget stop (a retry would start a
    fresh ledger and spend the budget again) nor any other configuration mistake (it fails the same way again)."""
    return not isinstance(error, UserError)


@dataclass
class Outcome:
    status: str = "complete"


@contextlib.contextmanager
def ending(run_dir: RunDir | None, invocation: str = "") -> Iterator[Outcome]:
    """Run the body. A budget stop ends the body, not the job: it goes on with ``outcome.status`` ``stopped:
    <why>`` to keep and export what is finished. Anything else raised is written to the manifest (of
    ``run_dir``, for an invocation it lists) and re-raised."""
    outcome = Outcome()
    try:
        yield outcome
    except BaseException as exc:
        outcome.status = status_of(exc)
        if isinstance(exc, BudgetExceeded):
            return
        if run_dir is not None:
            run_dir.set_status(invocation, outcome.status)
        raise
