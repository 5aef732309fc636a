"""Real embeddings (the packaged all-MiniLM-L6-v2) and real FAISS indexes on a slice of the default corpus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rubricforge.config import CorpusConfig, load_config
from rubricforge.corpora import faiss_index
from rubricforge.corpora.chunking import chunk_document
from rubricforge.corpora.embedding import Embedder, Shards, passage_input, prefetched
from rubricforge.corpora.gpu_search import TorchExactSearch, cuda_available, faiss_topk, use_gpu
from rubricforge.corpora.index_store import CorpusIndex
from rubricforge.corpora.indexing import build_index
from rubricforge.corpora.loaders import open_source
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError

pytestmark = pytest.mark.slow
K = 10


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder("default", device="cpu", batch_size=32)


@pytest.fixture(scope="module")
def corpus_slice(embedder, tmp_path_factory):
    """~400 default-corpus articles (every 25th: all topics; OPQ needs >= 384), embedded in shards, title queries."""
    docs = list(open_source(CorpusConfig()).documents(Rejects()))[::25]
    vectors = embedder.embed_passages([passage_input(d.title, d.text) for d in docs])
    folder = tmp_path_factory.mktemp("shards")
    shards = Shards(folder, len(vectors), 150)
    for i in range(len(shards)):
        np.save(shards.path(i), vectors[slice(*shards.bounds(i))])
    queries = embedder.embed_queries([d.title for d in docs])
    return docs, vectors, shards, queries


def make_index(kind: str, shards: Shards, **cfg):
    index_cfg = load_config(None, {"index": {"kind": kind, **cfg}}).index
    params = faiss_index.build_params(index_cfg, shards.n_rows, shards.dim)
    return faiss_index.build_faiss_index(params, shards), params


def recall(ids: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(ids, truth, strict=True)]))


# ---------------------------------------------------------------- embedding


def test_embeddings_are_normalised_float32_in_input_order(embedder):
    texts = ["A short one.", "A considerably longer sentence about the history of classical music in Europe.",
             "Mid-length text on the Moon landing.", "x", "Quantum mechanics describes nature at small scales."]
    before = embedder.batches_embedded
    small_batches = Embedder("default", device="cpu", batch_size=2)
    together = small_batches.embed_passages(texts)
    assert small_batches.batches_embedded == 3 and embedder.batches_embedded == before
    alone = np.vstack([embedder.embed_passages([t]) for t in texts])
    assert together.dtype == np.float32 and together.shape == (5, 384)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(together, alone, atol=1e-4)  # length sorting restored the order


def test_pipelined_batches_match_sentence_transformers_encode(embedder):
    texts = [f"Passage {i} on {topic}." * (i % 7 + 1) for i, topic in enumerate(["rivers", "comets", "jazz"] * 7)]
    small_batches = Embedder("default", device="cpu", batch_size=4)  # 6 batches: 5 tokenized ahead of their turn
    ours = small_batches.embed_passages(texts)
    reference = embedder.model.encode(texts, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_prefetched_yields_every_item_in_order_and_propagates_errors():
    assert list(prefetched(iter(range(7)))) == list(range(7)) and list(prefetched([])) == []

    def failing():
        yield 1
        raise ValueError("tokenizer broke")

    with pytest.raises(ValueError, match="tokenizer broke"):
        list(prefetched(failing()))


def test_query_and_passage_prefixes_are_applied():
    e5_style = Embedder("default", device="cpu", query_prefix="query: ", passage_prefix="passage: ")
    plain = Embedder("default", device="cpu")
    text = ["The Eiffel Tower is in Paris."]
    np.testing.assert_allclose(e5_style.embed_queries(text), plain.embed_passages(["query: " + text[0]]), atol=1e-5)
    np.testing.assert_allclose(e5_style.embed_passages(text), plain.embed_passages(["passage: " + text[0]]), atol=1e-5)


def test_unknown_embedding_model_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot be loaded offline"):
        Embedder(str(tmp_path / "no-model"), device="cpu").embed_queries(["x"])
    with pytest.raises(UserError, match="embedding.device"):
        Embedder(device="tpu").embed_queries(["x"])


# ---------------------------------------------------------------- FAISS indexes


def test_exact_search_finds_each_article_from_its_title(corpus_slice):
    docs, _, shards, queries = corpus_slice
    index, _ = make_index("exact", shards)
    _, ids = index.search(queries, 5)
    found = np.mean([i in row for i, row in enumerate(ids)])
    assert found >= 0.95, found


@pytest.mark.parametrize("kind, cfg, floor", [
    ("hnsw", {"hnsw_m": 16, "hnsw_ef_search": 64}, 0.95),
    ("ivfpq", {"pq_m": 48, "ivf_nprobe": 4}, 0.65),
    ("ivfpq", {"pq_m": 24, "opq": True, "ivf_nprobe": 4}, 0.6),
])
def test_approximate_indexes_recall_against_exact(corpus_slice, kind, cfg, floor):
    _, _, shards, queries = corpus_slice
    exact, _ = make_index("exact", shards)
    _, truth = exact.search(queries, K)
    index, params = make_index(kind, shards, **cfg)
    faiss_index.set_search_params(index, ef_search=cfg.get("hnsw_ef_search"), nprobe=cfg.get("ivf_nprobe"))
    assert index.ntotal == shards.n_rows
    if kind == "ivfpq":
        assert params["nlist"] == faiss_index.default_nlist(shards.n_rows) and params["opq"] == cfg.get("opq", False)
    _, ids = index.search(queries, K)
    assert recall(ids, truth) >= floor


@pytest.mark.parametrize("kind", ["exact", "hnsw", "ivfpq"])
def test_save_and_memory_mapped_load_round_trip(corpus_slice, tmp_path, kind):
    _, _, shards, queries = corpus_slice
    index, _ = make_index(kind, shards)
    faiss_index.set_search_params(index, ef_search=32, nprobe=4)
    expected = index.search(queries, K)
    faiss_index.save(index, tmp_path / "i.faiss")
    loaded = faiss_index.load(tmp_path / "i.faiss")
    faiss_index.set_search_params(loaded, ef_search=32, nprobe=4)
    got = loaded.search(queries, K)
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)


def test_ivfpq_parameter_errors(corpus_slice):
    _, _, shards, _ = corpus_slice
    with pytest.raises(UserError, match="does not divide the embedding dimension 384"):
        make_index("ivfpq", shards, pq_m=50)
    with pytest.raises(UserError, match="opq needs at least 384 training vectors"):
        make_index("ivfpq", shards, opq=True, ivf_train_size=100)


def test_torch_exact_search_matches_faiss(corpus_slice):
    _, vectors, shards, queries = corpus_slice
    exact, _ = make_index("exact", shards)
    ref_scores, ref_ids = exact.search(queries, K)
    np.testing.assert_array_equal(faiss_index.flat_vectors(exact), vectors)
    f_scores, f_ids = faiss_topk(vectors, queries, K)
    t_scores, t_ids = TorchExactSearch(vectors, device="cpu", dtype="float32", block_rows=128).search(queries, K)
    for ids, scores in ((f_ids, f_scores), (t_ids, t_scores)):
        np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
        assert recall(ids, ref_ids) >= 0.999  # identical up to exact ties


def test_gpu_mode_resolution():
    assert use_gpu("never", "exact") is False
    assert use_gpu("auto", "hnsw") is False
    with pytest.raises(UserError, match="index.kind=exact"):
        use_gpu("always", "ivfpq")
    if not cuda_available():
        assert use_gpu("auto", "exact") is False
        with pytest.raises(UserError, match="CUDA is not available"):
            use_gpu("always", "exact")


# ---------------------------------------------------------------- build_index and CorpusIndex


def _cfg(index_dir: Path, **over):
    base = {"corpus": {"limit": 150, "chunk_words": 48, "chunk_overlap": 8},
            "embedding": {"shard_size": 64, "device": "cpu"},
            "tools": {"index_dir": str(index_dir)}}
    for section, values in over.items():
        base.setdefault(section, {}).update(values)
    return load_config(None, base)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("index")
    cfg = _cfg(folder)
    return cfg, build_index(cfg, progress=False)


def test_build_then_open_search_and_browse(built):
    cfg, info = built
    assert info.kind == "exact" and info.n_documents == 150 and info.n_passages > 150  # long articles were chunked
    assert info.embedded_now == info.n_passages and info.reused == ()
    idx = CorpusIndex.open(info.path)
    assert len(idx) == info.n_passages and idx.corpus_hash == info.corpus_hash
    meta = idx.info()
    assert meta["embedding"]["dim"] == 384 and meta["index"]["kind"] == "exact"
    assert meta["corpus"]["rejects"]["total"] == 0 and meta["n_documents"] == 150

    docs = {d.id: d for d in open_source(cfg.corpus).documents(Rejects())}
    hits = idx.search(["2001: A Space Odyssey", "Albert Einstein"], 5)
    assert [len(h) for h in hits] == [5, 5]
    assert hits[0][0].passage.title == "2001: A Space Odyssey"
    assert hits[0][0].score >= hits[0][1].score
    long_doc = next(d for d in docs.values() if len(d.text.split()) > 48)
    chunks = idx.document(long_doc.id)
    assert [c.id for c in chunks] == [c.id for c in chunk_document(long_doc, 48, 8)]
    assert idx.document_text(long_doc.id) == " ".join(long_doc.text.split())
    assert idx.get(chunks[1].id) == chunks[1] and idx.get("nope") is None and idx.document("nope") == []
    assert idx.doc_id_for_url(long_doc.metadata["url"]) == long_doc.id
    assert sum(1 for _ in idx.iter_passages()) == len(idx)
    vecs = idx.embed_queries(["moon landing"])
    assert vecs.shape == (1, 384) and abs(float(np.linalg.norm(vecs)) - 1) < 1e-5
    assert not idx.on_gpu or cuda_available()
    idx.close()


def test_repeated_queries_are_embedded_once(built, monkeypatch):
    _, info = built
    idx = CorpusIndex.open(info.path)
    first = idx.embed_queries(["moon landing", "printing press"])
    seen: list[list[str]] = []
    original = idx.embedder.embed_queries
    monkeypatch.setattr(idx.embedder, "embed_queries", lambda texts: seen.append(list(texts)) or original(texts))
    again = idx.embed_queries(["printing press", "volcano", "moon landing", "volcano"])
    assert seen == [["volcano"]]  # only the new text reaches the model, once
    np.testing.assert_array_equal(again[[2, 0]], first)
    np.testing.assert_array_equal(again[1], again[3])
    idx.close()


def test_rebuild_reuses_finished_parts_and_resumes_lost_shards(built, tmp_path):
    cfg, first = built
    folder = tmp_path / "copy"
    shutil.copytree(first.path, folder)
    cfg = _cfg(folder)
    shard_files = sorted((folder / "embeddings").glob("shard-*.npy"))
    assert len(shard_files) == -(-first.n_passages // 64)
    mtimes = {p: p.stat().st_mtime_ns for p in shard_files}

    again = build_index(cfg, progress=False)
    assert again.embedded_now == 0 and again.reused == ("store", "embeddings", "index")
    assert again.corpus_hash == first.corpus_hash
    assert {p: p.stat().st_mtime_ns for p in shard_files} == mtimes

    shard_files[1].unlink()  # as if the build had stopped while embedding shard 1
    resumed = build_index(cfg, progress=False)
    assert resumed.embedded_now == 64 and "store" in resumed.reused
    assert all(p.stat().st_mtime_ns == mtimes[p] for p in shard_files if p != shard_files[1])

    hnsw = build_index(_cfg(folder, index={"kind": "hnsw"}), progress=False)
    assert hnsw.kind == "hnsw" and hnsw.reused == ("store", "embeddings") and hnsw.embedded_now == 0
    idx = CorpusIndex.open(folder)
    assert idx.kind == "hnsw"
    assert idx.search(["2001: A Space Odyssey"], 3)[0][0].passage.title == "2001: A Space Odyssey"

    rechunked = build_index(_cfg(folder, corpus={"chunk_words": 64}), progress=False)
    assert rechunked.corpus_hash != first.corpus_hash and rechunked.reused == ()
    assert rechunked.embedded_now == rechunked.n_passages < first.n_passages


def test_build_reports_rejects_next_to_the_index(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text('{"id": "a", "title": "Cats", "text": "Cats are small domesticated carnivores."}\n'
                   '{"id": "b", "text": ""}\nnot json\n'
                   '{"id": "c", "title": "Rivers", "text": "A river is a natural flowing watercourse."}\n')
    cfg = _cfg(tmp_path / "idx", corpus={"source": "jsonl", "path": str(src), "limit": None})
    info = build_index(cfg, progress=False)
    assert info.n_passages == 2 and info.n_rejected == 2
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["corpus"]["rejects"]["by_reason"] == {"empty text": 1, "invalid JSON": 1}
    assert len((tmp_path / "idx" / "rejects.jsonl").read_text().splitlines()) == 2
    assert CorpusIndex.open(tmp_path / "idx").search(["domestic cat"], 1)[0][0].passage.id == "a"


def test_open_without_an_index_names_the_folder_and_the_fix(tmp_path):
    with pytest.raises(UserError, match=r"no corpus index in .*rubricforge corpus build"):
        CorpusIndex.open(tmp_path / "missing")


def test_the_query_embedder_runs_under_the_index_lock(built, monkeypatch):
    """Two threads never run the embedder (its tokenizer is not thread-safe) at once: while it runs, another
    thread cannot take the index's lock."""
    import threading

    _, info = built
    idx = CorpusIndex.open(info.path)
    original, free = idx.embedder.embed_queries, []

    def probe(texts):
        other = threading.Thread(target=lambda: free.append(idx._lock.acquire(blocking=False)))
        other.start()
        other.join()
        return original(texts)

    monkeypatch.setattr(idx.embedder, "embed_queries", probe)
    idx.embed_queries(["moon landing"])
    assert free == [False]
    idx.close()


def test_concurrent_async_query_embeddings_share_model_calls(built, monkeypatch):
    """The calls of one loop waiting for the model go to it together, at most QUERY_BATCH queries per model
    call (a call is never split); each caller gets its own rows, as embedded alone."""
    import asyncio

    from rubricforge.corpora.index_store import QUERY_BATCH

    _, info = built
    idx = CorpusIndex.open(info.path)
    texts = [[f"query {i} about the moon"] for i in range(QUERY_BATCH + 4)] + [["printing press", "volcano"], []]
    alone = {t: idx.embedder.embed_queries([t])[0] for call in texts for t in call}
    seen: list[list[str]] = []
    original = idx.embedder.embed_queries
    monkeypatch.setattr(idx.embedder, "embed_queries", lambda batch: seen.append(list(batch)) or original(batch))

    async def main():
        return await asyncio.gather(*(idx.aembed_queries(call) for call in texts))

    got = asyncio.run(main())
    assert [len(call) for call in seen] == [QUERY_BATCH, 6]  # all calls came before the first batch started
    assert [t for call in seen for t in call] == [t for call in texts for t in call]
    for call, vectors in zip(texts, got, strict=True):
        assert vectors.shape == (len(call), 384)
        for t, v in zip(call, vectors, strict=True):
            np.testing.assert_allclose(v, alone[t], atol=1e-5)
    idx.close()


def test_a_failed_query_embedding_fails_only_the_calls_of_its_batch(built, monkeypatch):
    import asyncio

    _, info = built
    idx = CorpusIndex.open(info.path)
    original = idx.embedder.embed_queries

    def embed(batch):
        if "bad" in batch:
            raise RuntimeError("the model failed")
        return original(batch)

    monkeypatch.setattr(idx.embedder, "embed_queries", embed)

    async def main():
        first = asyncio.ensure_future(idx.aembed_queries(["bad"]))
        await asyncio.sleep(0)  # the first batch holds "bad" alone
        rest = await asyncio.gather(idx.aembed_queries(["moon landing"]), idx.aembed_queries(["volcano"]))
        return await asyncio.gather(first, return_exceptions=True), rest

    (failed,), rest = asyncio.run(main())
    assert isinstance(failed, RuntimeError) and [v.shape for v in rest] == [(1, 384), (1, 384)]
    assert not idx._waiting and not idx._batching  # nothing left behind for the loop
    idx.close()
