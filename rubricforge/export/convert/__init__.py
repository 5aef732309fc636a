"""Converters between rubricforge's dataset rows and the formats of the field (``rubricforge convert``).

One module per format, each with ``NAME``, ``DESCRIPTION``, ``detect(record)``, ``to_rubricforge(record, n)``
and ``from_rubricforge(row, source)`` (both raise ValueError with the reason a record cannot convert); every
conversion goes through the rubricforge row (:mod:`._rows`). :data:`FORMATS` is the registry, in detection
order (the first format whose ``detect`` accepts a record names the file's format); :func:`formats` adds the
formats of plugins (entry-point group ``rubricforge.formats``, :mod:`rubricforge.plugins`), detected after them.

Files: ``.jsonl`` (one record a line), ``.json`` (an array), ``.parquet``, or a dataset folder / run directory
(read as ``rubricforge reward score`` reads it). A record that cannot convert is skipped, counted by reason
and written to the rejects file (:class:`~rubricforge.io.rejects.Rejects`); the output is written under
a temporary name and renamed, so a failed conversion leaves no half file, and a conversion that produced no row
(an empty source, every record rejected) is a UserError that leaves the destination as it was. A source that is
not UTF-8 text and a destination that is a folder are UserErrors too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.export.convert import (deeprubric, drb, drtulu, healthbench, openinstruct, rar, researchqa,
                                       researchrubrics, rubrichub, rubricforge, trl, verl, verlrubric)
from rubricforge.extras import needs
from rubricforge.plugins import added
from rubricforge.io.datasets import read_rows, text_lines
from rubricforge.io.files import atomic_write_text

FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (verlrubric, verl, openinstruct, drtulu, deeprubric, drb,
                                                     healthbench, researchrubrics, rubrichub, researchqa, rar, trl,
                                                     rubricforge)}
RF = rubricforge.NAME


def formats() -> dict[str, Any]:
    """The built-in formats, then the plugins' (a module or object with the same five names)."""
    return {**FORMATS, **added("formats", FORMATS)}


def get_format(name: str) -> Any:
    if name not in (known := formats()):
        raise UserError(f"unknown format '{name}'", f"use one of: {', '.join(known)}")
    return known[name]


def detect_format(record: Any) -> str | None:
    if not isinstance(record, Mapping):
        return None
    return next((name for name, m in formats().items() if m.detect(record)), None)


# ------------------------------------------------------------------ files


def read_records(path: str | Path, rejects: Rejects | None = None) -> Iterator[tuple[int, Any]]:
    """``(n, record)`` of a file (n: 1-based JSONL line, else 0-based row); a JSONL line that is not JSON goes to
    ``rejects`` (or is a UserError without one)."""
    path = Path(path)
    if path.is_dir() or path.suffix == ".parquet":
        yield from enumerate(read_rows(path))
        return
    if not path.is_file():
        raise UserError(f"{path} not found", "pass a .jsonl, .json or .parquet file or a dataset folder")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})", "fix the file") from None
        except UnicodeDecodeError:
            raise UserError(f"{path} is not UTF-8 text", "pass a .json file saved as UTF-8") from None
        if isinstance(data, Mapping):
            data = next((v for v in data.values() if isinstance(v, list)), [data])
        yield from enumerate(data if isinstance(data, list) else [data])
        return
    for n, line in text_lines(path, "pass a .jsonl, .json or .parquet file saved as UTF-8"):
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError:
            if rejects is None:
                raise UserError(f"{path}:{n} is not valid JSON", "fix or remove that line") from None
            rejects.add(path, n, "not valid JSON", line.strip())


def write_records(path: str | Path, records: list[dict[str, Any]]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        with needs("data"):
            import pyarrow as pa
            import pyarrow.parquet as pq

        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(pa.Table.from_pylist(records), tmp)
        tmp.replace(path)
    elif path.suffix == ".json":
        atomic_write_text(path, json.dumps(records, ensure_ascii=False, indent=1) + "\n")
    else:
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


# ------------------------------------------------------------------ conversion


@dataclass
class Converted:
    source_format: str
    target_format: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # in the target format
    read: int = 0

    @property
    def converted(self) -> int:
        return len(self.rows)


def convert_records(records: Iterator[tuple[int, Any]], path: str | Path, to: str, source: str | None = None,
                    rejects: Rejects | None = None, label: str = "rubricforge") -> Converted:
    """Convert ``(n, record)`` pairs from ``source`` (None: detected from the first record) to ``to``."""
    rejects = rejects if rejects is not None else Rejects()
    target = get_format(to)
    out = Converted(source or "", to)
    reader = get_format(source) if source else None
    for n, record in records:
        out.read += 1
        if reader is None:
            if (found := detect_format(record)) is None:
                raise UserError(f"{path}: record {n} is in no known format",
                                f"pass --from (one of: {', '.join(formats())})")
            reader, out.source_format = get_format(found), found
        try:
            out.rows.append(convert_one(reader, target, record, n, label))
        except ValueError as exc:
            rejects.add(path, n, str(exc), record)
    return out


def convert_one(reader: Any, target: Any, record: Any, n: int, label: str = "rubricforge") -> dict[str, Any]:
    """One record from ``reader``'s format to ``target``'s; a ValueError with the one-line reason when it cannot."""
    try:
        if not isinstance(record, Mapping):
            raise ValueError("not a JSON object")
        return target.from_rubricforge(reader.to_rubricforge(record, n), label)
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(str(exc).splitlines()[0] if not isinstance(exc, KeyError) else f"missing field {exc}") from None


def convert_file(src: str | Path, dst: str | Path, to: str, source: str | None = None,
                 rejects_path: str | Path | None = None, label: str = "rubricforge") -> tuple[Converted, dict[str, Any]]:
    """``src`` -> ``dst`` in format ``to``; rejected records go to ``rejects_path`` (default
    ``<dst>.rejects.jsonl``). Returns the conversion and the rejects summary."""
    dst = Path(dst)
    if source is not None:
        get_format(source)
    get_format(to)
    if dst.is_dir():
        raise UserError(f"destination {dst} is a folder", f"pass a file to write, e.g. {dst / 'data.jsonl'}")
    with Rejects(rejects_path or dst.with_name(f"{dst.stem}.rejects.jsonl")) as rejects:
        got = convert_records(read_records(src, rejects), src, to, source, rejects, label)
        if got.rows:
            write_records(dst, got.rows)
    if not got.rows:
        why = (f"all {got.read} records were rejected (first reason: {next(iter(rejects.by_reason))}; all in "
               f"{rejects.path})" if got.read else "it holds no record")
        raise UserError(f"nothing converted from {src}: {why}; {dst} is left as it was",
                        "fix the records (or pass --from / another --to)")
    return got, rejects.summary()


def to_rubricforge_rows(path: str | Path, rows: list[Any]) -> tuple[list[dict[str, Any]], str | None]:
    """Rows of any known format as rubricforge rows (``reward score`` and ``eval --tasks`` read what users have);
    the detected format, None for rubricforge's own rows (returned unchanged). A row that cannot convert is a
    UserError naming the file, the row (1-based: a JSONL file's line when it has no blank lines) and the reason."""
    found = detect_format(rows[0]) if rows else None
    if found in (None, RF):
        return rows, None
    out = []
    for n, record in enumerate(rows):
        try:
            out.append(convert_one(get_format(found), FORMATS[RF], record, n))
        except ValueError as exc:
            raise UserError(f"{path}: row {n + 1} ({found} format) cannot be read: {exc}",
                            f"fix it, or convert the file with `rubricforge convert {path} OUT.jsonl --from {found}` "
                            "to skip every bad row and list it in the rejects file") from None
    return out, found
