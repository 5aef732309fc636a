"""Training as a job: what every ``rubricforge train`` command shares (:func:`train_job`); the trainers
themselves are :mod:`rubricforge.training`.

The run directory is the stage's output folder (``train.output_dir``, default ``<run_dir>/train/<stage>``;
HOTE: ``<run_dir>/hote``)::

    config.yaml      the resolved config (no secrets)
    manifest.json    status, invocations and their judge ledgers, model, inputs and their sha256, TRL version,
                     the trainer class (TRL's own or a seam of :mod:`~rubricforge.training.trl_seams`), steps,
                     checkpoints and the final model
    ledgers/         one file per invocation: the judge's LLM ledger
    checkpoint-N/    TRL's checkpoints (with the per-step state of the self-play drivers)
    model files      the final policy

**One resume rule.** A command started again on the same run directory resumes from its latest complete
``checkpoint-N`` (one with its ``trainer_state.json``); ``--resume-from`` only overrides which. HOTE's steps
resume from its own per-step state, which names each trainer's checkpoint. Inputs other than the ones the
checkpoints were trained on (model, dataset hash) are refused.

**The one budget rule** (:mod:`rubricforge.jobs.base`): when the judge's budget is spent inside a reward
function, :class:`~rubricforge.errors.BudgetExceeded` ends the step before its optimiser update; the run saves
a checkpoint of the last finished step, the manifest says ``stopped: <why>``, and the CLI exits 3. The same
command with a larger budget resumes from that checkpoint (the judge calls already made come from the cache).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.jobs.base import JobResult, ending, job_result
from rubricforge.io.files import atomic_write_json
from rubricforge.rundir import RunDir, now
from rubricforge.text import fmt

if TYPE_CHECKING:
    from rubricforge.training.grpo import GRPORun
    from rubricforge.training.hote import HoteRun

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def checkpoints(folder: str | Path) -> list[Path]:
    """The complete ``checkpoint-N`` folders in ``folder``, oldest first (a save killed midway has no
    ``trainer_state.json``: it does not count)."""
    found = [(int(m.group(1)), p) for p in Path(folder).glob("checkpoint-*")
             if (m := CHECKPOINT.match(p.name)) and (p / "trainer_state.json").is_file()]
    return [p for _, p in sorted(found)]


def resume_point(folder: str | Path, resume_from: str | Path | None = None) -> Path | None:
    """Where a run resumes: ``resume_from`` when given, else the latest complete checkpoint in ``folder``."""
    if resume_from is not None:
        return Path(resume_from)
    done = checkpoints(folder)
    return done[-1] if done else None


def input_hash(path: str | Path) -> str | None:
    """The sha256 of an input file, or of a folder's files (their relative paths and bytes); None for a name that
    is not a local path (a Hub dataset)."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(path) if f != path else f.name).encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass
class TrainSummary:
    """What a training run did: its stage, status, steps, last logged metrics and where the policy went."""

    stage: str
    status: str
    steps: int
    out: str
    metrics: dict[str, float] = field(default_factory=dict)
    shown: dict[str, str] = field(default_factory=dict)  # label -> metric key, the metrics the CLI prints
    resumed_from: str | None = None
    checkpoint: str | None = None  # the latest checkpoint (a stopped run resumes from it)

    def lines(self) -> list[str]:
        shown = "".join(f", {label} {fmt(self.metrics.get(key))}" for label, key in self.shown.items())
        resumed = f" (resumed from {Path(self.resumed_from).name})" if self.resumed_from else ""
        where = self.out if self.status == "complete" else f"{self.checkpoint or 'no checkpoint yet'}"
        return [f"{self.status}: train {self.stage}: {self.steps} steps{resumed}{shown} -> {where}"]


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("trl", "transformers", "torch"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def train_job(cfg: Config, stage: str, out: str | Path, train: Callable[[Path | None], Any], *, model: str,
              inputs: Mapping[str, str | Path], trainer: Any = None, client: Any = None,
              resume_from: str | Path | None = None, shown: Mapping[str, str] | None = None,
              steps: Callable[[], int] | None = None, checkpoint_dir: str | Path | None = None) -> JobResult:
    """Run one training stage as a job in its run directory ``out``: write ``config.yaml`` and a ``running``
    manifest, call ``train(resume)`` (``resume``: :func:`resume_point`; it trains and saves the policy to ``out``),
    and end as every job does (:func:`~rubricforge.jobs.base.ending`): complete, or ``stopped: <why>`` after a
    budget stop with a checkpoint of ``trainer``'s last finished step saved.

    ``model``: the initial policy; ``inputs``: the files trained on (hashed into the manifest); ``client``: the
    judge's LLM client, whose ledger is the run's; ``steps``: the steps done (default: ``trainer``'s global step);
    ``checkpoint_dir``: where the checkpoints are (default ``out``); ``shown``: the metrics the summary prints
    (label -> logged key, default the last loss)."""
    run, invocation, started = RunDir(out, f"train-{stage}"), uuid.uuid4().hex[:12], now()
    checkpoint_dir = Path(checkpoint_dir or out)
    run.check_kind()
    resume = resume_point(checkpoint_dir, resume_from)
    settings = {"model": model, "inputs": {k: input_hash(v) for k, v in inputs.items()}}
    run.check_settings("settings", settings, resume is not None, "checkpoints")
    fields: dict[str, Any] = {"stage": stage, "settings": settings, "inputs": {k: str(v) for k, v in inputs.items()},
                              "trainer": type(trainer).__name__ if trainer is not None else None,
                              "train_versions": _versions(), "resumed_from": str(resume) if resume else None}
    run.write_config(cfg)
    run.write_manifest(invocation, started, "running", fields)
    with ending(run, invocation) as outcome:
        try:
            train(resume)
        finally:
            if client is not None:
                atomic_write_json(run.ledger_path(invocation, "judge"), {"ledger": client.ledger.summary()})
    if outcome.status != "complete" and trainer is not None and trainer.state.global_step > 0:
        from rubricforge.training.trl_seams import save_checkpoint

        save_checkpoint(trainer)
    done = checkpoints(checkpoint_dir)
    history = getattr(getattr(trainer, "state", None), "log_history", [])
    shown = dict({"last loss": "loss"} if shown is None else shown)
    key = next(iter(shown.values()), "")
    summary = TrainSummary(stage, outcome.status, steps() if steps else int(trainer.state.global_step), str(out),
                           next((h for h in reversed(history) if key in h), {}), shown,
                           str(resume) if resume else None, str(done[-1]) if done else None)
    run.write_manifest(invocation, started, outcome.status, {
        **fields, "checkpoints": [p.name for p in done],
        "model_dir": str(out) if outcome.status == "complete" else None}, {"steps": summary.steps})
    return job_result(summary, out, run)


def trainer_job(cfg: Config, stage: str, trainer: Any, model: str, inputs: Mapping[str, str | Path],
                resume_from: str | Path | None = None) -> JobResult:
    """:func:`train_job` of a supervised trainer (SFT, DPO, self-SFT): it trains, then saves the policy to its
    output folder, the run directory."""
    out = Path(trainer.args.output_dir)

    def train(resume: Path | None) -> None:
        trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
        trainer.save_model(str(out))

    return train_job(cfg, stage, out, train, model=model, inputs=inputs, trainer=trainer, resume_from=resume_from)


def grpo_job(cfg: Config, stage: str, run: GRPORun, model: str, inputs: Mapping[str, str | Path],
             resume_from: str | Path | None = None, also: Mapping[str, str] | None = None) -> JobResult:
    """:func:`train_job` of a built GRPO run (``train grpo``, ``score``, ``rubric-generator``): the judge's ledger
    is the run's, and the summary shows the last reward (and ``also``: label -> logged key)."""
    return train_job(cfg, stage, run.output_dir, run.train, model=model, inputs=inputs, trainer=run.trainer,
                     client=run.client, resume_from=resume_from, shown={"last reward": "reward", **(also or {})})


def hote_job(cfg: Config, run: HoteRun, model: str, inputs: Mapping[str, str | Path],
             on_step: Callable[[Any], None] | None = None) -> JobResult:
    """:func:`train_job` of HOTE's self-play (:class:`~rubricforge.training.hote.HoteRun`): it resumes from its own
    per-step state in ``<run_dir>/hote``, and a budget stop keeps the steps already saved there."""
    return train_job(cfg, "hote", run.dir, lambda _resume: run.train(on_step=on_step), model=model, inputs=inputs,
                     client=run.client, shown={}, steps=lambda: run.step, checkpoint_dir=run.dir / "solver")
