"""Dataset readers: the rows of an exported dataset folder (``data.jsonl``), a run directory
(``dataset/data.jsonl``), a ``.jsonl`` or ``.parquet`` file, or a ``datasets.save_to_disk`` folder.

:func:`load_examples` wants an ``id`` on every row (rows of other formats get one from their converter, which the
caller passes as ``adapt``: DR Tulu rows have none).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rubricforge.errors import UserError
from rubricforge.extras import needs

Adapt = Callable[[Path, list[Any]], tuple[list[dict[str, Any]], str | None]]


def load_examples(path: str | Path, adapt: Adapt | None = None) -> dict[str, dict[str, Any]]:
    """Examples by id. ``adapt(path, rows)`` turns rows of other formats into rubricforge rows first (``reward
    score`` passes the converters of :mod:`rubricforge.export.convert`)."""
    path = Path(path)
    rows = list(read_rows(path))
    if adapt is not None:
        rows, _ = adapt(path, rows)
    examples: dict[str, dict[str, Any]] = {}
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or row.get("id") in (None, ""):
            raise UserError(f"{path}: example {n} has no 'id'",
                            f"score a rubricforge dataset; other formats (DR Tulu, DeepRubric, DRB, RaR, ...) "
                            f"convert with `rubricforge convert {path} OUT.jsonl`")
        examples[str(row["id"])] = row
    return examples


def read_rows(path: str | Path) -> Iterator[Any]:
    """The rows of a dataset folder, run directory, ``.jsonl`` or ``.parquet`` file (see the module docstring)."""
    path = Path(path)
    if path.is_dir():
        for candidate in (path / "data.jsonl", path / "dataset" / "data.jsonl"):
            if candidate.is_file():
                yield from read_rows(candidate)
                return
        if (path / "dataset_dict.json").is_file() or (path / "dataset_info.json").is_file():
            yield from _saved_dataset(path)
            return
        raise UserError(f"{path} holds no dataset", "pass a dataset folder, a run directory, or a .jsonl/.parquet file")
    if not path.is_file():
        raise UserError(f"dataset {path} not found", "pass the dataset folder written by `rubricforge build`")
    if path.suffix == ".parquet":
        with needs("data"):
            import pyarrow as pa
            import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except pa.ArrowException as exc:
            raise UserError(f"{path} is not a readable parquet file ({str(exc).splitlines()[0][:200]})",
                            "pass a parquet file, or a .jsonl file of one row a line") from None
        yield from table.to_pylist()
        return
    for n, line in text_lines(path, "pass a dataset folder, a .parquet file or a .jsonl file saved as UTF-8"):
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            raise UserError(f"{path}:{n} is not valid JSON", "fix or remove that line") from None


def text_lines(path: Path, fix: str) -> Iterator[tuple[int, str]]:
    """``(n, line)`` for each non-blank line of ``path`` (n 1-based); a line that is not UTF-8 is a UserError
    naming it, with ``fix``."""
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError(f"{path} is not UTF-8 text (line {n})", fix) from None
            if line.strip():
                yield n, line


def _saved_dataset(path: Path) -> Iterator[Any]:
    with needs("data"):
        from datasets import DatasetDict, load_from_disk

    data = load_from_disk(str(path))
    if isinstance(data, DatasetDict):
        data = data["train"] if "train" in data else next(iter(data.values()))
    yield from data
