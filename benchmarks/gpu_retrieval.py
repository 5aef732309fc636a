"""Exact inner-product search at GPU scale: torch on the GPU (``TorchExactSearch``) against FAISS on the CPU.

The corpus is ``--n`` random unit vectors of ``--dim`` (384, MiniLM's) made on the device itself with a fixed
seed (nothing travels to the GPU machine). For each dtype (fp16, fp32) and query batch size it prints
queries/s, the corpus bytes read per second (one pass over the matrix per batch: n x dim x bytes / seconds;
the score matrix written and read by ``topk`` is not counted) as a fraction of the GPU's peak HBM bandwidth
(a table keyed by the GPU's name), and TFLOP/s. The baseline, measured in the same run: FAISS
``IndexFlatIP`` on the CPU (``--threads``, default every core) over the first ``--faiss-n`` rows (default
1 M: the whole corpus in fp32 would take a CPU minutes per batch), its queries/s scaled to ``--n`` rows
(exact search time grows linearly with the rows) — each ratio line says so. Recall@10 of torch against
FAISS over those same rows checks that both search the same thing::

    python3 benchmarks/gpu_retrieval.py --out $OUT/gpu_retrieval.json                    # 5 M x 384 on a GPU
    .venv/bin/python benchmarks/gpu_retrieval.py --n 20000 --device cpu --out runs/gpu_retrieval.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "benchmarks"))

from retrieval import recall_at_k, timed  # noqa: E402

from rubricforge.corpora.gpu_search import TorchExactSearch  # noqa: E402

K = 10
# peak HBM bandwidth (bytes/s) by a part of the GPU's name, most specific first (vendor data sheets)
PEAK_BANDWIDTH = (("H200", 4.8e12), ("H100 NVL", 3.9e12), ("H100 PCIe", 2.0e12), ("H100", 3.35e12),
                  ("A100-SXM4-80GB", 2.039e12), ("A100 80GB PCIe", 1.935e12), ("A100", 1.555e12),
                  ("L40S", 0.864e12), ("A10G", 0.6e12), ("L4", 0.3e12))
SCORE_BLOCK_BYTES = 1 << 31  # database rows per block: the batch's score block stays under 2 GiB


def peak_bandwidth(gpu: str | None) -> float | None:
    return next((bw for key, bw in PEAK_BANDWIDTH if gpu and key in gpu), None)


def unit_vectors(torch: Any, n: int, dim: int, device: str, seed: int, chunk: int = 1 << 20) -> Any:
    """``n`` x ``dim`` float32 rows drawn N(0, 1) on ``device`` and normalised, chunk by chunk."""
    gen = torch.Generator(device=device).manual_seed(seed)
    out = torch.empty((n, dim), dtype=torch.float32, device=device)
    for lo in range(0, n, chunk):
        rows = torch.randn((min(chunk, n - lo), dim), generator=gen, device=device)
        out[lo:lo + len(rows)] = torch.nn.functional.normalize(rows, dim=1)
    return out


def bench_faiss(matrix: np.ndarray, queries: np.ndarray, batches: list[int], threads: int, n_full: int,
                min_seconds: float) -> tuple[dict[str, Any], np.ndarray]:
    """FAISS IndexFlatIP over ``matrix`` per batch size; the top-10 ids of the largest batch for recall."""
    import faiss

    faiss.omp_set_num_threads(threads)
    index = faiss.IndexFlatIP(matrix.shape[1])
    index.add(matrix)
    rows: dict[str, Any] = {}
    ids = np.empty(0)
    for b in batches:
        seconds, (_, ids) = timed(partial(index.search, queries[:b], K), min_seconds)
        qps = b / seconds
        rows[str(b)] = {"qps": round(qps, 1), "qps_scaled_to_n": round(qps * len(matrix) / n_full, 2)}
        print(f"faiss-cpu  {len(matrix):>10} rows  batch {b:>5}  {qps:12.1f} q/s  -> {qps * len(matrix) / n_full:10.2f} q/s "
              f"scaled to {n_full} rows  ({threads} threads; baseline)", flush=True)
    return rows, ids


def bench_torch(matrix: Any, queries: np.ndarray, batches: list[int], dtype: str, device: str, peak: float | None,
                faiss_rows: dict[str, Any], faiss_n: int, faiss_ids: np.ndarray, min_seconds: float) -> dict[str, Any]:
    """``TorchExactSearch`` over the whole ``matrix`` in ``dtype`` per batch size (one pass per batch), and its
    recall@10 against FAISS over the first ``faiss_n`` rows."""
    qb = max(batches)
    elt = 2 if dtype == "float16" else 4
    block_rows = max(1 << 16, SCORE_BLOCK_BYTES // (qb * elt))
    searcher = TorchExactSearch(matrix, device=device, dtype=dtype, block_rows=block_rows, query_batch=qb)
    n, dim = searcher.matrix.shape
    out: dict[str, Any] = {"block_rows": block_rows, "batches": {}}
    for b in batches:
        seconds, _ = timed(partial(searcher.search, queries[:b], K), min_seconds)
        qps, read = b / seconds, n * dim * elt / seconds
        row = {"qps": round(qps, 1), "seconds_per_batch": round(seconds, 6), "corpus_gb_per_s": round(read / 1e9, 1),
               "tflops": round(2 * b * n * dim / seconds / 1e12, 2),
               "vs_faiss_cpu": round(qps / faiss_rows[str(b)]["qps_scaled_to_n"], 1)}
        if peak:
            row["hbm_fraction"] = round(read / peak, 3)
        out["batches"][str(b)] = row
        frac = f"  {row['hbm_fraction']:.0%} of peak HBM" if peak else ""
        print(f"torch      {device} {dtype:<8} batch {b:>5}  {qps:12.1f} q/s  {read / 1e9:7.1f} GB/s corpus read{frac}  "
              f"{row['tflops']:6.2f} TFLOP/s  {row['vs_faiss_cpu']:.1f}x faiss-cpu (scaled)", flush=True)
    subset = TorchExactSearch(searcher.matrix[:faiss_n], device=device, dtype=dtype, block_rows=block_rows,
                              query_batch=qb)
    _, ids = subset.search(queries[:len(faiss_ids)], K)
    out["recall_at_10_vs_faiss"] = round(recall_at_k(ids, faiss_ids), 4)
    print(f"torch      {dtype}: recall@10 vs faiss-cpu over the first {faiss_n} rows {out['recall_at_10_vs_faiss']:.4f}",
          flush=True)
    return out


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5_000_000, help="corpus rows (default 5 M)")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu for a toy-scale check")
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--batches", default="1,16,256,1024", help="query batch sizes")
    ap.add_argument("--faiss-n", type=int, default=1_000_000, help="rows FAISS searches (its q/s is scaled to --n)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="FAISS threads")
    ap.add_argument("--min-seconds", type=float, default=1.0, help="time each measurement at least this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True, help="write the results here as JSON")
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("--device cuda but CUDA is not available (use --device cpu for a toy-scale check)")
    batches = sorted(int(b) for b in args.batches.split(","))
    faiss_n = min(args.faiss_n, args.n)
    gpu = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else None
    peak = peak_bandwidth(gpu)

    t = time.perf_counter()
    matrix = unit_vectors(torch, args.n, args.dim, args.device, args.seed)
    queries = unit_vectors(torch, max(batches), args.dim, args.device, args.seed + 1).cpu().numpy()
    subset = matrix[:faiss_n].cpu().numpy()
    made_s = time.perf_counter() - t
    print(f"data       {args.n} x {args.dim} random unit vectors made on {args.device} in {made_s:.1f} s (seed {args.seed}); "
          f"{gpu or platform.processor() or platform.machine()}; peak HBM {peak / 1e12 if peak else '?'} TB/s; "
          f"torch {torch.__version__}; CPU {os.cpu_count()} cores", flush=True)
    results: dict[str, Any] = {"gpu": gpu, "peak_hbm_bytes_per_s": peak, "device": args.device, "n": args.n,
                               "dim": args.dim, "seed": args.seed, "k": K, "torch_version": torch.__version__,
                               "cpu_cores": os.cpu_count(), "faiss_threads": args.threads, "faiss_n": faiss_n,
                               "faiss_note": f"FAISS IndexFlatIP (fp32, CPU) over the first {faiss_n} rows; "
                                             f"qps_scaled_to_n = qps x {faiss_n} / {args.n} (exact search is linear "
                                             "in the rows)"}
    results["faiss_cpu"], faiss_ids = bench_faiss(subset, queries, batches, args.threads, args.n, args.min_seconds)
    del subset
    results["torch"] = {}
    for dtype in args.dtypes.split(","):
        results["torch"][dtype] = bench_torch(matrix, queries, batches, dtype, args.device, peak, results["faiss_cpu"],
                                              faiss_n, faiss_ids, args.min_seconds)
        if args.device.startswith("cuda"):
            results["torch"][dtype]["peak_gpu_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
