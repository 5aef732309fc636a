"""Seed topics: one per document, stratified by topic label, no repeats, reproducible, saved."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rubricforge.corpora.index_store import CorpusIndex
from rubricforge.errors import UserError
from rubricforge.pipelines.tree.seeds import SEEDS_FILE, load_or_sample_seeds, sample_seeds
from rubricforge.schema import Passage


@pytest.fixture(scope="module")
def passages(small_index_cfg) -> list[Passage]:
    with CorpusIndex.from_config(small_index_cfg) as idx:
        return list(idx.iter_passages())


def test_seeds_are_stratified_round_robin_over_topics(passages):
    topics = {p.metadata["topic"] for p in passages}
    assert len(topics) == 12
    seeds = sample_seeds(passages, 24, seed=7)
    assert Counter(s.topic for s in seeds) == {t: 2 for t in topics}
    # the first 12 seeds are one per topic: round-robin, not "fill one topic first"
    assert len({s.topic for s in seeds[:12]}) == 12
    assert [s.index for s in seeds] == list(range(24))
    by_id = {p.id: p for p in passages}
    for s in seeds:
        assert by_id[s.passage_id].metadata["topic"] == s.topic
        assert s.query == by_id[s.passage_id].title


def test_one_seed_per_document_and_no_repeats(passages):
    n_docs = len({p.doc_id for p in passages})
    assert n_docs < len(passages)  # the slice has a chunked document (two passages, one document)
    seeds = sample_seeds(passages, 10_000, seed=0)
    assert len(seeds) == n_docs
    assert len({s.doc_id for s in seeds}) == n_docs
    chunked = [s for s in seeds if Counter(p.doc_id for p in passages)[s.doc_id] > 1]
    assert chunked and all(s.passage_id.endswith("#0") for s in chunked)  # the document's first passage


def test_seeds_are_reproducible_and_a_larger_draw_extends_a_smaller_one(passages):
    a, b = sample_seeds(passages, 20, seed=3), sample_seeds(passages, 20, seed=3)
    assert a == b
    assert sample_seeds(passages, 5, seed=3) == a[:5]
    assert [s.doc_id for s in sample_seeds(passages, 20, seed=4)] != [s.doc_id for s in a]


def test_unlabelled_corpus_is_one_stratum(passages):
    plain = [p.model_copy(update={"metadata": {}}) for p in passages]
    seeds = sample_seeds(plain, 30, seed=1)
    assert len(seeds) == 30 and {s.topic for s in seeds} == {""}
    assert len({s.doc_id for s in seeds}) == 30


def test_seeds_file_is_reused_extended_and_guarded(tmp_path, passages):
    first = load_or_sample_seeds(tmp_path, passages, n=3, seed=5, corpus_hash="h1")
    stored = json.loads((tmp_path / SEEDS_FILE).read_text())
    assert stored["seed"] == 5 and stored["corpus_hash"] == "h1" and len(stored["seeds"]) == 3
    # read back without looking at the corpus at all
    assert load_or_sample_seeds(tmp_path, iter(()), n=3, seed=5, corpus_hash="h1") == first
    more = load_or_sample_seeds(tmp_path, passages, n=6, seed=5, corpus_hash="h1")
    assert more[:3] == first and len(more) == 6
    with pytest.raises(UserError, match="build.seed"):
        load_or_sample_seeds(tmp_path, passages, n=3, seed=6, corpus_hash="h1")
    with pytest.raises(UserError, match="corpus"):
        load_or_sample_seeds(tmp_path, passages, n=3, seed=5, corpus_hash="other")


def test_empty_corpus_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no passages"):
        load_or_sample_seeds(tmp_path, iter(()), n=2, seed=0, corpus_hash="h")
