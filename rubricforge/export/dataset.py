"""Export a run's retained examples as a dataset folder (``<run>/dataset/``)::

    hf/  drtulu/  trl/        datasets.save_to_disk (DatasetDict, split "train") per config
    data.parquet  data.jsonl  the default config
    drtulu.parquet drtulu.jsonl  the DR Tulu view
    trl.parquet               the TRL view
    stats.json  README.md     the statistics and the dataset card

The quality gates ran before, as the job's last stage (:mod:`rubricforge.jobs.gates`: decontamination, dedup,
learnability); the export drops what their record (``quality.json``) drops, and puts it in ``stats.json`` and on
the card. It calls no model: it only reads the run directory and writes the dataset.

The folder is written under a temporary name and swapped in by rename, so a reader never sees a
half-written export; an earlier export is replaced. Rows are sorted by id, so the same logs give the
same files. An empty run still exports valid, empty datasets with the full schema, and the card says
why nothing was retained.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.export import hub
from rubricforge.export.card import render_card
from rubricforge.export.layout import FILES, FOLDERS
from rubricforge.export.run import RunData, load_run, read_gates
from rubricforge.export.stats import compute_stats
from rubricforge.export.views import features, view_rows
from rubricforge.extras import needs
from rubricforge.io.files import atomic_write_json, atomic_write_text

DATASET_DIR = "dataset"


def export_dataset(run_dir: str | Path | RunData, cfg: Config | None = None, push_to_hub: str | None = None,
                   token: str | None = None) -> dict[str, Any]:
    """Write ``run_dir/dataset/`` (and push it when ``push_to_hub`` names a Hub repo); ``run_dir`` may be the run
    already read (:func:`~rubricforge.export.run.load_run`). ``token``: the one a job's preflight checked
    (:func:`~rubricforge.export.hub.check_push`); without it the push is checked here, before any work. Returns
    ``{"path", "n_examples", "stats", "pushed_to"}``."""
    if push_to_hub is not None and token is None:
        token = hub.check_push(push_to_hub)  # before any work: a bad id or a missing token fails fast
    run = run_dir if isinstance(run_dir, RunData) else load_run(run_dir, cfg)
    run_dir = run.run_dir
    stats = compute_stats(run)
    examples, stats["quality"] = read_gates(run_dir, run.examples)
    rows = view_rows(examples, source=f"rubricforge_{run.name}")
    return write_export(run_dir, rows, features(), stats, render_card, len(examples), push_to_hub, token)


def write_export(run_dir: Path, rows: dict[str, list[dict[str, Any]]], feats: dict[str, Any], stats: dict[str, Any],
                 card: Callable[..., str], n_examples: int, push_to_hub: str | None = None,
                 token: str | None = None) -> dict[str, Any]:
    """The dataset folder from rows and features per config (``default``, ``drtulu``, ``trl``), the stats and
    a card renderer ``card(stats, layout=..., repo_id=...)``; shared by every pipeline's export."""
    configs = _datasets(rows, feats)
    out = run_dir / DATASET_DIR
    _clean_leftovers(run_dir)
    tmp = run_dir / f".{DATASET_DIR}.tmp-{os.getpid()}"
    try:
        _write(tmp, configs, stats, card)
        _swap(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if push_to_hub is not None and token is not None:
        hub.push(push_to_hub, configs, card(stats, layout="hub", repo_id=push_to_hub), token)
    return {"path": str(out), "n_examples": n_examples, "stats": stats, "pushed_to": push_to_hub}


def _datasets(rows: dict[str, list[dict[str, Any]]], feats: dict[str, Any]) -> dict[str, Any]:
    with needs("data"):
        from datasets import Dataset, DatasetDict

    return {name: DatasetDict({"train": Dataset.from_dict({k: [r[k] for r in rows[name]] for k in feats[name]},
                                                          features=feats[name])})
            for name in FOLDERS if name in rows}


def _write(folder: Path, configs: dict[str, Any], stats: dict[str, Any], card: Callable[..., str]) -> None:
    folder.mkdir(parents=True)
    with _quiet_datasets():
        for name, dd in configs.items():
            train = dd["train"]
            # an empty dataset needs one explicit (empty) shard, else load_from_disk cannot read it back
            dd.save_to_disk(str(folder / FOLDERS[name]), num_shards=None if len(train) else {"train": 1})
            parquet, jsonl = FILES[name]
            train.to_parquet(str(folder / parquet))
            if jsonl:
                lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in train)
                atomic_write_text(folder / jsonl, "".join(lines))
    atomic_write_json(folder / "stats.json", stats)
    atomic_write_text(folder / "README.md", card(stats, layout="local"))


def _swap(new: Path, out: Path) -> None:
    """Replace ``out`` by ``new``: two renames, the old copy removed last."""
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _clean_leftovers(run_dir: Path) -> None:
    """Temporary folders a killed export left behind (restoring the old export if the swap was cut)."""
    for path in run_dir.glob(f".{DATASET_DIR}.*-*"):
        if ".old-" in path.name and not (run_dir / DATASET_DIR).exists():
            path.rename(run_dir / DATASET_DIR)
        else:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _quiet_datasets():
    with needs("data"):
        import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()
