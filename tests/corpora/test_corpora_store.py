"""Chunking, the passage store and the snapshot hash (no model needed)."""

from __future__ import annotations

import threading

import pytest

from rubricforge.corpora.chunking import chunk_document, join_chunks, window_starts
from rubricforge.corpora.snapshot import SnapshotHasher, corpus_hash
from rubricforge.corpora.store import PassageStore, StoreWriter
from rubricforge.errors import UserError
from rubricforge.schema import Passage


def doc(n_words: int, doc_id: str = "d1", title: str = "A Title") -> Passage:
    return Passage(id=doc_id, doc_id=doc_id, title=title, text=" ".join(f"w{i}" for i in range(n_words)),
                   metadata={"topic": "T"})


# ---------------------------------------------------------------- chunking


def test_short_document_stays_one_passage_with_the_document_id():
    [p] = chunk_document(doc(10), words=16, overlap=4)
    assert p.id == "d1" and p.doc_id == "d1" and p.title == "A Title" and p.metadata == {"topic": "T"}
    [exact] = chunk_document(doc(16), words=16, overlap=4)
    assert exact.id == "d1"


def test_windows_overlap_and_keep_title_and_metadata():
    chunks = chunk_document(doc(40), words=16, overlap=4)
    assert window_starts(40, 16, 4) == [0, 12, 24]
    assert [c.id for c in chunks] == ["d1#0", "d1#1", "d1#2"]
    assert all(c.doc_id == "d1" and c.title == "A Title" and c.metadata["topic"] == "T" for c in chunks)
    words = [c.text.split() for c in chunks]
    assert [len(w) for w in words] == [16, 16, 16]
    assert words[0][-4:] == words[1][:4] and words[1][-4:] == words[2][:4]  # 4 words of overlap
    assert words[2][-1] == "w39"  # the last window reaches the end
    assert [c.metadata["word_start"] for c in chunks] == [0, 12, 24]


def test_last_window_may_be_short_and_join_restores_the_text():
    d = doc(45)
    chunks = chunk_document(d, words=16, overlap=4)
    assert [len(c.text.split()) for c in chunks] == [16, 16, 16, 9]
    assert join_chunks(chunks) == d.text
    assert join_chunks(list(reversed(chunks))) == d.text
    assert join_chunks(chunk_document(doc(5), 16, 4)) == doc(5).text


def test_zero_overlap_and_invalid_parameters():
    chunks = chunk_document(doc(32), words=16, overlap=0)
    assert [c.text.split()[0] for c in chunks] == ["w0", "w16"]
    with pytest.raises(UserError, match="chunk_overlap"):
        chunk_document(doc(32), words=16, overlap=16)


# ---------------------------------------------------------------- store


@pytest.fixture
def store(tmp_path):
    writer = StoreWriter(tmp_path / "p.sqlite")
    assert writer.add_document(chunk_document(doc(40, "d1", "First"), 16, 4))
    assert writer.add_document(chunk_document(doc(5, "d2", "Second"), 16, 4))
    assert not writer.add_document(chunk_document(doc(40, "d1", "Dup"), 16, 4))  # same id: refused, nothing kept
    assert writer.add_document([Passage(id="d3", doc_id="d3", text="unicode ✓ — text",
                                        metadata={"n": [1, 2], "url": "https://x/d3"})])
    assert (writer.n_documents, writer.n_passages) == (3, 5)
    writer.close()
    s = PassageStore(tmp_path / "p.sqlite")
    yield s
    s.close()


def test_store_lookup_by_id_position_and_document(store):
    assert len(store) == 5
    assert store.get("d1#1").text.split()[0] == "w12" and store.get("d1#1").title == "First"
    assert store.get("d3").metadata == {"n": [1, 2], "url": "https://x/d3"}
    assert store.get("d3").text == "unicode ✓ — text"
    assert store.doc_id_for_url("https://x/d3") == "d3" and store.doc_id_for_url("https://x/none") is None
    assert store.get("missing") is None
    assert [p.id for p in store.at([4, 0, 3, 0])] == ["d3", "d1#0", "d2", "d1#0"]
    assert [p.id for p in store.document("d1")] == ["d1#0", "d1#1", "d1#2"]
    assert store.document("nope") == []


def test_store_iteration_in_order_and_ranges(store):
    assert [p.id for p in store] == ["d1#0", "d1#1", "d1#2", "d2", "d3"]
    assert [p.id for p in store.iter_range(1, 3, batch=1)] == ["d1#1", "d1#2"]
    assert list(store.iter_range(4, 99)) == [store.get("d3")]


def test_store_serves_concurrent_readers(store):
    errors: list[Exception] = []

    def read() -> None:
        try:
            for _ in range(200):
                assert store.get("d2").title == "Second"
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---------------------------------------------------------------- snapshot hash


def test_snapshot_hash_is_stable_and_sensitive():
    passages = chunk_document(doc(40), 16, 4) + [Passage(id="x", title="T", text="body")]
    base = corpus_hash(passages, 16, 4)
    assert base == corpus_hash([p.model_copy() for p in passages], 16, 4)
    hasher = SnapshotHasher(16, 4)
    for p in passages:
        hasher.update(p)
    assert hasher.hexdigest() == base
    changed_text = passages[:-1] + [passages[-1].model_copy(update={"text": "body!"})]
    changed_title = passages[:-1] + [passages[-1].model_copy(update={"title": "U"})]
    changed_id = passages[:-1] + [passages[-1].model_copy(update={"id": "y"})]
    variants = {corpus_hash(changed_text, 16, 4), corpus_hash(changed_title, 16, 4), corpus_hash(changed_id, 16, 4),
                corpus_hash(list(reversed(passages)), 16, 4), corpus_hash(passages, 16, 5),
                corpus_hash(passages, 17, 4), corpus_hash(passages[:-1], 16, 4)}
    assert base not in variants and len(variants) == 7
    # field boundaries matter: ("ab", "c") and ("a", "bc") differ
    assert corpus_hash([Passage(id="ab", title="c", text="t")], 16, 4) != \
        corpus_hash([Passage(id="a", title="bc", text="t")], 16, 4)
    # metadata is not part of the snapshot
    assert corpus_hash([Passage(id="a", text="t", metadata={"k": 1})], 16, 4) == \
        corpus_hash([Passage(id="a", text="t")], 16, 4)
