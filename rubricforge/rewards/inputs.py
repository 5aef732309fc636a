"""Reading what `rubricforge reward` scores: a dataset of examples and a JSONL of agent responses.

Examples: an exported dataset folder (``data.jsonl``), a run directory (``dataset/data.jsonl``), a
``.jsonl`` or ``.parquet`` file, or a ``datasets.save_to_disk`` folder; every row needs an ``id`` (rows of
other formats get one from their converter, which ``reward score`` applies: DR Tulu rows have none).

Responses: JSONL, one rollout a line: ``{"id": <example id>, "response": <string or chat messages>,
"snippets": [<Snippet>, ...] (optional: the rollout's snippet store)}``, or DeepResearch Bench's reports
``{"id", "prompt", "article"}``. A malformed line, or one whose
id is not in the dataset, is skipped, counted and written to ``<responses>.rejects.jsonl``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.corpora.rejects import Rejects
from rubricforge.corpora.snippets import SnippetStore
from rubricforge.errors import UserError, require_file
from rubricforge.extras import needs
from rubricforge.schema import Snippet


@dataclass
class Response:
    line: int  # 1-based line in the responses file: the response's identity
    example_id: str
    completion: str | list[dict[str, Any]]
    snippets: SnippetStore | None

    @property
    def key(self) -> str:
        return f"{self.example_id}#{self.line}"


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


def load_responses(path: str | Path, examples: dict[str, dict[str, Any]], rejects: Rejects) -> list[Response]:
    path = require_file(path, "responses file", 'pass a JSONL of {"id": <example id>, "response": ...} lines')
    out = []
    with path.open(encoding="utf-8") as fh:
        n = 0
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    out.append(_response(n, json.loads(line), examples))
                except (ValueError, TypeError) as exc:  # JSON, validation and shape errors
                    rejects.add(path, n, str(exc).splitlines()[0], line.strip())
        except UnicodeDecodeError:
            raise UserError(f"responses file {path} is not UTF-8 text (near line {n + 1})",
                            'pass a JSONL of {"id": <example id>, "response": ...} lines saved as UTF-8') from None
    return out


def _response(n: int, record: Any, examples: dict[str, dict[str, Any]]) -> Response:
    if not isinstance(record, dict):
        raise ValueError("a line must be a JSON object")
    example_id = str(record.get("id", ""))
    if example_id not in examples:
        raise ValueError(f"id {example_id!r} is not in the dataset")
    completion = record.get("response", record.get("article"))  # DeepResearch Bench's reports: {"id", "prompt", "article"}
    if not isinstance(completion, (str, list)) or (isinstance(completion, list)
                                                   and not all(isinstance(m, dict) for m in completion)):
        raise ValueError("'response' must be a string or a list of chat messages")
    snippets = record.get("snippets")
    store = None if snippets is None else SnippetStore(Snippet.model_validate(s) for s in snippets)
    return Response(n, example_id, completion, store)
