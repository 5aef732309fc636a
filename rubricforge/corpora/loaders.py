"""Streaming corpus loaders: every source becomes an iterator of document-level :class:`Passage`.

Sources (``corpus.source``):

* ``jsonl`` / ``parquet`` — generic files with a field mapping ``corpus.fields`` (our field ->
  source field) for ``id``, ``title``, ``text``; any other mapped field goes to ``metadata``.
* ``hf`` — a Hugging Face dataset saved with ``save_to_disk`` (same mapping).
* ``wiki18`` — FlashRAG's wiki-18 JSONL, ``{"id", "contents": "\\"Title\\"\\ntext"}``.
  Other scalar fields (``url``, ...) go to the passage's metadata; wiki-18 records are passages of an
  article, so a record's document is its article — its ``url``, else its title — and ``browse`` / ``/access``
  return the whole article.
* ``openscholar`` — OpenScholar datastore passage shards ``raw_passages-*.jsonl`` (``text`` field;
  every other scalar field is kept in ``metadata``).
* ``default`` — the packaged vital-article summaries (:mod:`rubricforge.corpora.default_corpus`).

Nothing is read whole: JSONL is read line by line (``.gz`` too), parquet by record batches, Hugging
Face datasets by memory-mapped batches. ``corpus.path`` may be a file, a folder or a glob.
A record without an id gets a stable one, ``<file stem>:<line>``. Malformed records (bad JSON, no
text, empty text) go to :class:`~rubricforge.io.rejects.Rejects`; a mapped field that no record
has is a :class:`UserError` naming the field, the file and the fields that exist.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricforge.config import CorpusConfig
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.extras import needs
from rubricforge.schema import Passage

CORE_FIELDS = ("id", "title", "text")
FIELD_CHECK_RECORDS = 100  # a mapped field absent from all of the first N records is a config error
BATCH_ROWS = 1024


# ---------------------------------------------------------------- field mapping


@dataclass(frozen=True)
class FieldMap:
    """Our field -> source field. ``required`` are the source fields the data must have."""

    id: str = "id"
    title: str = "title"
    text: str = "text"
    extra: dict[str, str] = field(default_factory=dict)  # metadata key -> source field
    required: frozenset[str] = frozenset({"text"})
    keep_other_fields: bool = False  # openscholar: every other scalar field goes to metadata

    @classmethod
    def from_config(cls, fields: dict[str, str], keep_other_fields: bool = False) -> FieldMap:
        core = {name: fields.get(name, name) for name in CORE_FIELDS}
        extra = {ours: src for ours, src in fields.items() if ours not in CORE_FIELDS}
        required = frozenset({core["text"], *fields.values()})
        return cls(**core, extra=extra, required=required, keep_other_fields=keep_other_fields)

    def source_fields(self) -> list[str]:
        return list(dict.fromkeys([self.id, self.title, self.text, *self.extra.values()]))

    def check(self, available: Iterable[str], where: Path) -> None:
        available = set(available)
        for ours, src in [("text", self.text), ("id", self.id), ("title", self.title), *self.extra.items()]:
            if src in self.required and src not in available:
                raise UserError(
                    f"field '{src}' (corpus.fields.{ours}) is not in {where}; its fields are: "
                    f"{', '.join(sorted(available)) or '(none)'}",
                    f"map {ours} to one of them, e.g. --set corpus.fields.{ours}=<field>")

    def to_passage(self, rec: dict[str, Any], fallback_id: str) -> Passage | str:
        """The passage, or the reason the record is rejected."""
        text = rec.get(self.text)
        if text is None:
            return "missing text"
        if not isinstance(text, str):
            return "text is not a string"
        text = text.strip()
        if not text:
            return "empty text"
        rid = rec.get(self.id)
        doc_id = str(rid).strip() if rid is not None and str(rid).strip() else fallback_id
        title = rec.get(self.title)
        metadata = {ours: rec[src] for ours, src in self.extra.items() if rec.get(src) is not None}
        if self.keep_other_fields:
            used = {self.id, self.title, self.text, *self.extra.values()}
            metadata.update({k: v for k, v in rec.items()
                             if k not in used and isinstance(v, (str, int, float, bool))})
        return Passage(id=doc_id, doc_id=doc_id, title=str(title).strip() if title is not None else "",
                       text=text, metadata=metadata)


def _checked(records: Iterator[tuple[int, dict[str, Any]]], fmap: FieldMap,
             where: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Check the mapping against the fields seen in the first records, then pass everything on."""
    head = list(itertools.islice(records, FIELD_CHECK_RECORDS))
    if head:
        fmap.check(set().union(*(rec.keys() for _, rec in head)), where)
    yield from head
    yield from records


def _emit(records: Iterable[tuple[int, dict[str, Any]]], fmap: FieldMap, where: Path,
          rejects: Rejects) -> Iterator[Passage]:
    for line, rec in records:
        result = fmap.to_passage(rec, f"{_stem(where)}:{line}")
        if isinstance(result, str):
            rejects.add(where, line, result, rec)
        else:
            yield result


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json", ".parquet"):
        name = name.removesuffix(suffix)
    return name


# ---------------------------------------------------------------- paths


def resolve_paths(path: str | None, patterns: tuple[str, ...], source: str) -> list[Path]:
    """A file, a folder (files matching ``patterns``) or a glob -> sorted existing files."""
    if not path:
        raise UserError(f"corpus.path is not set for corpus.source={source}",
                        "pass --path <file|folder|glob> or set corpus.path")
    p = Path(path).expanduser()
    if any(ch in path for ch in "*?["):
        files = sorted((Path(q) for q in glob.glob(str(p), recursive=True) if Path(q).is_file()), key=_natural_key)
        if not files:
            raise UserError(f"no corpus files match {path}", "check corpus.path")
        return files
    if p.is_dir():
        files = sorted({q for pat in patterns for q in p.glob(pat) if q.is_file()}, key=_natural_key)
        if not files:
            raise UserError(f"corpus folder {p} has no files matching {' or '.join(patterns)}",
                            "point corpus.path at the corpus file or a folder holding such files")
        return files
    if not p.is_file():
        raise UserError(f"corpus file {p} not found", "check corpus.path (a file, a folder or a glob)")
    return [p]


def _natural_key(path: Path) -> list[Any]:
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", str(path))]


# ---------------------------------------------------------------- readers


def iter_json_lines(path: Path, rejects: Rejects) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every JSON object line; bad lines are rejected, blank ones skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                rejects.add(path, lineno, "not UTF-8", raw.decode("utf-8", "replace"))
                continue
            except ValueError:
                rejects.add(path, lineno, "invalid JSON", raw.decode("utf-8", "replace"))
                continue
            if not isinstance(rec, dict):
                rejects.add(path, lineno, "not a JSON object", rec)
                continue
            yield lineno, rec


def iter_jsonl(files: list[Path], fmap: FieldMap, rejects: Rejects) -> Iterator[Passage]:
    for path in files:
        yield from _emit(_checked(iter_json_lines(path, rejects), fmap, path), fmap, path, rejects)


def iter_parquet(files: list[Path], fmap: FieldMap, rejects: Rejects) -> Iterator[Passage]:
    with needs("data"):
        import pyarrow.parquet as pq

    for path in files:
        try:
            pf = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for non-parquet files
            raise UserError(f"{path} is not a readable parquet file ({exc.__class__.__name__})",
                            "check corpus.path and corpus.source") from None
        names = pf.schema_arrow.names
        fmap.check(names, path)
        columns = [c for c in fmap.source_fields() if c in names] if not fmap.keep_other_fields else None
        rows = _numbered(batch.to_pylist() for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns))
        yield from _emit(rows, fmap, path, rejects)


def iter_hf(path: Path, split: str | None, fmap: FieldMap, rejects: Rejects) -> Iterator[Passage]:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with needs("data"):
        import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError:
        raise UserError(f"{path} is not a Hugging Face dataset saved with save_to_disk",
                        "point corpus.path at the folder written by Dataset.save_to_disk") from None
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        name = split or (splits[0] if len(splits) == 1 else "train" if "train" in ds else None)
        if name not in ds:
            raise UserError(f"dataset {path} has splits {', '.join(splits)}; corpus.split={split!r} is not one",
                            "set corpus.split to one of them")
        ds = ds[name]
    fmap.check(ds.column_names, path)
    if not fmap.keep_other_fields:
        ds = ds.select_columns([c for c in fmap.source_fields() if c in ds.column_names])
    rows = _numbered((_rows_of(batch) for batch in ds.iter(batch_size=BATCH_ROWS)), start=0)
    yield from _emit(rows, fmap, path, rejects)


def _rows_of(batch: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(batch)
    return [dict(zip(keys, values, strict=True)) for values in zip(*batch.values(), strict=True)]


def _numbered(batches: Iterable[list[dict[str, Any]]], start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    return enumerate(itertools.chain.from_iterable(batches), start)


def wiki18_record(rec: dict[str, Any]) -> dict[str, Any]:
    """FlashRAG wiki-18: the first line of ``contents`` is the title, in double quotes."""
    contents = rec.get("contents")
    if not isinstance(contents, str):
        return {"id": rec.get("id"), "text": None}
    title, sep, text = contents.partition("\n")
    if not sep:
        title, text = "", contents
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1].strip()
    extra = {k: v for k, v in rec.items() if k not in ("id", "contents", "title", "text")}
    return {**extra, "id": rec.get("id"), "title": title, "text": text}


def iter_wiki18(files: list[Path], rejects: Rejects) -> Iterator[Passage]:
    raw_fields = FieldMap(text="contents", required=frozenset({"contents"}))  # checks the raw lines
    for path in files:
        lines = _checked(iter_json_lines(path, rejects), raw_fields, path)
        for p in _emit(((n, wiki18_record(rec)) for n, rec in lines), FieldMap(keep_other_fields=True), path,
                       rejects):
            yield p.model_copy(update={"doc_id": str(p.metadata.get("url") or p.title or p.id)})  # the article


# ---------------------------------------------------------------- sources


@dataclass(frozen=True)
class Source:
    """An opened corpus source: the files it reads (for fingerprints) and its document stream."""

    name: str
    files: list[Path]
    iterate: Callable[[Rejects], Iterator[Passage]]  # the whole stream, before the limit
    limit: int | None = None  # at most this many accepted documents

    def documents(self, rejects: Rejects) -> Iterator[Passage]:
        return itertools.islice(self.iterate(rejects), self.limit)

    def fingerprint(self) -> list[dict[str, Any]]:
        """What identifies the input without reading it: each file's path, size and mtime."""
        out = []
        for f in self.files:
            st = f.stat()
            out.append({"path": str(f.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        return out


def open_source(corpus: CorpusConfig) -> Source:
    """Resolve ``corpus.source`` / ``corpus.path`` into a :class:`Source` (missing input -> UserError)."""
    return dataclasses.replace(_open(corpus), limit=corpus.limit)


def _open(corpus: CorpusConfig) -> Source:
    kind = corpus.source
    if kind == "default":
        from rubricforge.corpora.default_corpus import iter_default_corpus, summaries_path

        return Source(kind, [summaries_path()], iter_default_corpus)
    if kind == "jsonl":
        files = resolve_paths(corpus.path, ("*.jsonl", "*.jsonl.gz", "*.json"), kind)
        fmap = FieldMap.from_config(corpus.fields)
        return Source(kind, files, lambda rj: iter_jsonl(files, fmap, rj))
    if kind == "parquet":
        files = resolve_paths(corpus.path, ("*.parquet",), kind)
        fmap = FieldMap.from_config(corpus.fields)
        return Source(kind, files, lambda rj: iter_parquet(files, fmap, rj))
    if kind == "hf":
        folder = Path(corpus.path or "").expanduser()
        if not corpus.path or not folder.is_dir():
            raise UserError(f"Hugging Face dataset folder {corpus.path} not found",
                            "set corpus.path to a folder written by Dataset.save_to_disk")
        files = sorted((p for p in folder.rglob("*") if p.is_file()), key=_natural_key)
        fmap = FieldMap.from_config(corpus.fields)
        return Source(kind, files, lambda rj: iter_hf(folder, corpus.split, fmap, rj))
    if kind == "wiki18":
        files = resolve_paths(corpus.path, ("*.jsonl", "*.jsonl.gz"), kind)
        return Source(kind, files, lambda rj: iter_wiki18(files, rj))
    if kind == "openscholar":
        files = resolve_paths(corpus.path, ("raw_passages-*.jsonl", "raw_passages-*.jsonl.gz"), kind)
        fmap = FieldMap.from_config(corpus.fields, keep_other_fields=True)
        return Source(kind, files, lambda rj: iter_jsonl(files, fmap, rj))
    raise UserError(f"unknown corpus.source '{kind}'", "use default, jsonl, parquet, hf, wiki18 or openscholar")
