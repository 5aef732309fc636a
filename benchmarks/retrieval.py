"""Retrieval benchmark: embedding throughput, ANN recall@10 against exact search, queries per second.

Baselines are measured in the same run: exact FAISS search for the indexes (recall@k and the qps
ratios are against it), CPU embedding for GPU embedding, CPU FAISS exact search for torch GPU search,
torch CPU embedding for the OpenVINO backend (``--backends``: passages/s ratio, and recall@10 of exact
search over OpenVINO vectors against exact search over torch vectors, each with its own query vectors).

    .venv/bin/python benchmarks/retrieval.py                       # the full default corpus, CPU
    .venv/bin/python benchmarks/retrieval.py --backends --backend-limit 2000 --queries 300   # torch vs OpenVINO
    python3 benchmarks/retrieval.py --device cuda                  # + GPU embedding and torch GPU search
    python3 benchmarks/retrieval.py --device cuda --synthetic 500000 --random-vectors 5000000

``--synthetic N`` embeds N generated passages (words drawn from the default corpus, 40-200 words
each) instead of the corpus; ``--random-vectors M`` times exact search over M random unit vectors
(the default corpus is far too small to load a GPU). ``--model`` and ``--summaries`` point at copies
of the packaged model / corpus file on machines where the packages are not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from rubricforge.config import Config, load_config  # noqa: E402
from rubricforge.corpora import faiss_index  # noqa: E402
from rubricforge.corpora.chunking import chunk_document  # noqa: E402
from rubricforge.corpora.default_corpus import iter_default_corpus  # noqa: E402
from rubricforge.corpora.embedding import Embedder, Shards, passage_input  # noqa: E402
from rubricforge.corpora.gpu_search import TorchExactSearch, faiss_topk  # noqa: E402
from rubricforge.io.rejects import Rejects  # noqa: E402

K = 10


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda adds GPU embedding and GPU search")
    ap.add_argument("--model", default="default", help="embedding model (default: the packaged all-MiniLM-L6-v2)")
    ap.add_argument("--summaries", type=Path, default=None, help="path of summaries_en-us.json (default: packaged)")
    ap.add_argument("--synthetic", type=int, default=0, metavar="N", help="embed N generated passages instead")
    ap.add_argument("--random-vectors", type=int, default=0, metavar="M",
                    help="also time exact search over M random vectors")
    ap.add_argument("--cpu-embed-limit", type=int, default=None, help="embed at most this many passages on the CPU")
    ap.add_argument("--queries", type=int, default=1000, help="number of queries (article descriptions)")
    ap.add_argument("--kinds", default=None,
                    help="comma list of exact,hnsw,ivfpq,ivfpq-opq (default: all; exact when synthetic)")
    ap.add_argument("--batch-size", type=int, default=None, help="embedding batch size (default: config; 512 on cuda)")
    ap.add_argument("--backends", action="store_true", help="only compare the CPU embedding backends (torch, openvino)")
    ap.add_argument("--backend-limit", type=int, default=2000, help="passages embedded by each backend")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    return ap.parse_args()


def timed(fn, min_seconds: float = 1.0) -> tuple[float, object]:
    """Seconds per call of ``fn`` (repeated until ``min_seconds`` passed, after one warm-up) and its result."""
    result = fn()
    reps, start = 0, time.perf_counter()
    while True:
        result = fn()
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / reps, result


def one_by_one(index, queries: np.ndarray) -> None:
    for i in range(len(queries)):
        index.search(queries[i:i + 1], K)


def recall_at_k(ids: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(ids, truth, strict=True)]))


def load_texts(args: argparse.Namespace, cfg: Config) -> tuple[list[str], list[str], str]:
    """Passage texts to embed, query texts, and a description of the data."""
    docs = list(iter_default_corpus(Rejects(), args.summaries))
    rng = np.random.default_rng(0)
    picked = rng.choice(len(docs), size=min(args.queries, len(docs)), replace=False)
    queries = [docs[i].metadata.get("description") or docs[i].title for i in picked]
    if args.synthetic:
        vocab = np.array(sorted({w for d in docs for w in d.text.split()}))
        lengths = rng.integers(40, 201, size=args.synthetic)
        texts = [" ".join(vocab[rng.integers(0, len(vocab), size=n)]) for n in lengths]
        return texts, queries, f"{args.synthetic} synthetic passages (40-200 words from the default corpus vocabulary)"
    passages = [p for d in docs for p in chunk_document(d, cfg.corpus.chunk_words, cfg.corpus.chunk_overlap)]
    return ([passage_input(p.title, p.text) for p in passages], queries,
            f"default corpus: {len(docs)} articles -> {len(passages)} passages "
            f"(chunk_words={cfg.corpus.chunk_words}, overlap={cfg.corpus.chunk_overlap})")


def bench_embedding(args, cfg, texts: list[str], devices: list[str]) -> tuple[dict, np.ndarray, Embedder]:
    out: dict[str, dict] = {}
    vectors, embedder = None, None
    for device in devices:
        bs = args.batch_size or (512 if device == "cuda" else cfg.embedding.batch_size)
        emb = Embedder(args.model, device=device, batch_size=bs, fp16=cfg.embedding.fp16, backend="torch")
        emb.embed_passages(texts[:bs])  # load the model and warm up
        limit = args.cpu_embed_limit if device == "cpu" and args.cpu_embed_limit else len(texts)
        start = time.perf_counter()
        vecs = emb.embed_passages(texts[:limit])
        seconds = time.perf_counter() - start
        out[device] = {"passages": limit, "seconds": round(seconds, 2), "passages_per_s": round(limit / seconds, 1),
                       "batch_size": bs, "fp16": device == "cuda" and cfg.embedding.fp16}
        if limit == len(texts):
            vectors, embedder = vecs, emb
        print(f"embedding  {device:<5} {limit:>9} passages  {seconds:8.1f} s  {limit / seconds:10.1f} passages/s  "
              f"(batch {bs}{', fp16' if out[device]['fp16'] else ''})", flush=True)
    if "cuda" in out and "cpu" in out:
        ratio = out["cuda"]["passages_per_s"] / out["cpu"]["passages_per_s"]
        out["gpu_vs_cpu"] = round(ratio, 1)
        print(f"embedding  GPU/CPU throughput ratio: {ratio:.1f}x")
    assert vectors is not None and embedder is not None
    return out, vectors, embedder


def bench_backends(args, cfg, texts: list[str], query_texts: list[str]) -> dict:
    """torch (baseline) against OpenVINO on the CPU: throughput, and recall@10 of OpenVINO's exact top-10
    against torch's over the same passages."""
    texts = texts[:args.backend_limit]
    out: dict[str, dict] = {}
    results = {}
    for backend in ("torch", "openvino"):
        emb = Embedder(args.model, device="cpu", batch_size=args.batch_size or cfg.embedding.batch_size, backend=backend)
        emb.embed_passages(texts[:64])  # load (and for OpenVINO export + compile), warm up
        start = time.perf_counter()
        vecs = emb.embed_passages(texts)
        seconds = time.perf_counter() - start
        _, ids = faiss_topk(vecs, emb.embed_queries(query_texts), K)
        results[backend] = ids
        out[backend] = {"passages": len(texts), "seconds": round(seconds, 2), "passages_per_s": round(len(texts) / seconds, 1)}
    out["openvino"]["vs_torch"] = round(out["openvino"]["passages_per_s"] / out["torch"]["passages_per_s"], 2)
    out["openvino"]["recall_at_10_vs_torch"] = round(recall_at_k(results["openvino"], results["torch"]), 4)
    for backend, row in out.items():
        extra = (f"  ({row['vs_torch']:.2f}x torch, recall@10 vs torch {row['recall_at_10_vs_torch']:.4f})"
                 if backend != "torch" else "  (baseline)")
        print(f"backend    {backend:<9} {row['passages']:>7} passages  {row['seconds']:8.1f} s  "
              f"{row['passages_per_s']:8.1f} passages/s{extra}", flush=True)
    return out


def as_shards(vectors: np.ndarray, folder: Path) -> Shards:
    folder.mkdir(parents=True, exist_ok=True)
    shards = Shards(folder, len(vectors), 65536)
    for i in range(len(shards)):
        np.save(shards.path(i), vectors[slice(*shards.bounds(i))])
    return shards


def bench_indexes(cfg: Config, vectors: np.ndarray, queries: np.ndarray, kinds: list[str], workdir: Path) -> dict:
    shards = as_shards(vectors, workdir / "shards")
    out: dict[str, dict] = {}
    truth = None
    base_batch = base_single = None
    for name in kinds:
        kind, opq = ("ivfpq", True) if name == "ivfpq-opq" else (name, False)
        icfg = cfg.index.model_copy(update={"kind": kind, "opq": opq})
        params = faiss_index.build_params(icfg, len(vectors), vectors.shape[1])
        start = time.perf_counter()
        index = faiss_index.build_faiss_index(params, shards)
        build_s = time.perf_counter() - start
        faiss_index.set_search_params(index, ef_search=icfg.hnsw_ef_search, nprobe=icfg.ivf_nprobe)
        batch_s, (_, ids) = timed(partial(index.search, queries, K))
        single = queries[:200]
        single_s, _ = timed(partial(one_by_one, index, single))
        if truth is None:
            truth, base_batch, base_single = ids, batch_s, single_s
        row = {"params": params, "build_s": round(build_s, 2), "recall_at_10": round(recall_at_k(ids, truth), 4),
               "batch_qps": round(len(queries) / batch_s, 1), "single_qps": round(len(single) / single_s, 1),
               "batch_qps_vs_exact": round(base_batch / batch_s, 2),
               "single_qps_vs_exact": round(base_single / single_s, 2)}
        out[name] = row
        print(f"index      {name:<10} build {build_s:7.2f} s  recall@10 {row['recall_at_10']:.4f}  "
              f"batch {row['batch_qps']:>10.1f} q/s ({row['batch_qps_vs_exact']:.2f}x exact)  "
              f"one-by-one {row['single_qps']:>9.1f} q/s ({row['single_qps_vs_exact']:.2f}x exact)", flush=True)
    return out


def bench_gpu_search(matrix: np.ndarray, queries: np.ndarray, label: str) -> dict:
    """Exact top-k: CPU FAISS (baseline) against torch on the GPU, fp32 and fp16."""
    cpu_s, (_, truth) = timed(partial(faiss_topk, matrix, queries, K))
    out = {"rows": len(matrix), "queries": len(queries), "faiss_cpu_qps": round(len(queries) / cpu_s, 1)}
    print(f"exact      {label}: {len(matrix)} rows x {len(queries)} queries")
    print(f"exact      faiss CPU          {len(queries) / cpu_s:12.1f} q/s  (baseline)", flush=True)
    for dtype in ("float32", "float16"):
        searcher = TorchExactSearch(matrix, device="cuda", dtype=dtype)
        gpu_s, (_, ids) = timed(partial(searcher.search, queries, K))
        out[f"torch_gpu_{dtype}_qps"] = round(len(queries) / gpu_s, 1)
        out[f"torch_gpu_{dtype}_vs_cpu"] = round(cpu_s / gpu_s, 1)
        out[f"torch_gpu_{dtype}_recall_at_10"] = round(recall_at_k(ids, truth), 4)
        print(f"exact      torch GPU {dtype:<8} {len(queries) / gpu_s:12.1f} q/s  ({cpu_s / gpu_s:.1f}x CPU)  "
              f"recall@10 vs CPU {out[f'torch_gpu_{dtype}_recall_at_10']:.4f}", flush=True)
        del searcher
    return out


def main() -> None:
    import platform
    import tempfile

    import torch

    args = parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda but CUDA is not available")
    cfg = load_config(None, {})
    texts, query_texts, description = load_texts(args, cfg)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else None
    print(f"data       {description}; {len(query_texts)} queries; {platform.processor() or platform.machine()} "
          f"x{torch.get_num_threads()} threads" + (f"; GPU {gpu}" if gpu else ""), flush=True)
    results: dict = {"data": description, "gpu": gpu, "cpu_threads": torch.get_num_threads()}

    if args.backends:
        results["backends"] = bench_backends(args, cfg, texts, query_texts)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=2))
        return
    devices = ["cpu", "cuda"] if args.device == "cuda" else ["cpu"]
    results["embedding"], vectors, embedder = bench_embedding(args, cfg, texts, devices)
    queries = embedder.embed_queries(query_texts)

    kinds = args.kinds.split(",") if args.kinds else (["exact"] if args.synthetic else
                                                      ["exact", "hnsw", "ivfpq", "ivfpq-opq"])
    with tempfile.TemporaryDirectory() as tmp:
        results["indexes"] = bench_indexes(cfg, vectors, queries, kinds, Path(tmp))
    if args.device == "cuda":
        results["gpu_search"] = {"embedded": bench_gpu_search(vectors, queries, "embedded passages")}
        if args.random_vectors:
            rng = np.random.default_rng(0)
            matrix = rng.standard_normal((args.random_vectors, vectors.shape[1]), dtype=np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            results["gpu_search"]["random"] = bench_gpu_search(matrix, queries, "random unit vectors")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
