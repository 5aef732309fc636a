"""Exact top-k inner-product search on the GPU with torch, and its CPU FAISS counterpart.

FAISS' own GPU wheels (``faiss-gpu-cu12``) ship no sm_90 kernels and fail on Hopper (H100/H200), so
exact search on a GPU is a matmul + ``topk`` in torch: the embedding matrix is uploaded once (fp16 by
default: half the memory, tensor-core matmuls with fp32 accumulation), database rows are scanned in
blocks and queries in batches so the score matrix stays bounded, and per-block top-k lists are
merged. :func:`faiss_topk` and :func:`torch_topk` share one signature so benchmarks compare them.

``index.gpu``: ``never`` searches on the CPU; ``auto`` uses the GPU for the exact index when CUDA
is present; ``always`` insists (no CUDA, or a non-exact index -> UserError). HNSW and IVF-PQ
always search on the CPU (the FAISS GPU versions of them are exactly the kernels that fail).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rubricforge.errors import UserError
from rubricforge.extras import needs

QUERY_BATCH = 256
BLOCK_ROWS = 1 << 22  # 4M database rows per block: a 256 x 4M fp16 score block is 2 GiB


def cuda_available() -> bool:
    with needs("index"):
        import torch

    return torch.cuda.is_available()


def use_gpu(mode: str, kind: str) -> bool:
    """Resolve ``index.gpu`` for an index of ``kind``."""
    if mode == "never":
        return False
    if mode == "always":
        if kind != "exact":
            raise UserError(f"index.gpu=always needs index.kind=exact (this index is {kind}; "
                            "HNSW and IVF-PQ search on the CPU)", "set index.gpu=auto or build an exact index")
        if not cuda_available():
            raise UserError("index.gpu=always but CUDA is not available on this machine",
                            "set index.gpu=auto (GPU when present) or never")
        return True
    return kind == "exact" and cuda_available()


def faiss_topk(matrix: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """CPU exact search with FAISS (BLAS): ``(scores, ids)``, each ``(len(queries), k)``."""
    with needs("index"):
        import faiss

    k = min(k, len(matrix))
    return faiss.knn(np.ascontiguousarray(queries, dtype=np.float32), np.ascontiguousarray(matrix, dtype=np.float32),
                     k, metric=faiss.METRIC_INNER_PRODUCT)


class TorchExactSearch:
    """The matrix resident on ``device``; :meth:`search` returns the top-k rows by inner product.

    ``matrix`` is a NumPy array (uploaded in blocks) or a torch tensor (moved to ``device`` / ``dtype``, kept
    as is when it is there already: a benchmark makes its corpus on the GPU). ``query_batch`` queries share
    one pass over the matrix."""

    def __init__(self, matrix: Any, device: str = "cuda", dtype: str = "float16", block_rows: int = BLOCK_ROWS,
                 query_batch: int = QUERY_BATCH):
        with needs("index"):
            import torch

        self.torch = torch
        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype)
        self.block_rows = block_rows
        self.query_batch = query_batch
        if isinstance(matrix, torch.Tensor):
            self.matrix = matrix.to(self.device, self.dtype)
            return
        n, d = matrix.shape
        self.matrix = torch.empty((n, d), dtype=self.dtype, device=self.device)
        for lo in range(0, n, block_rows):  # upload in blocks: never a full float32 copy on the device
            block = np.ascontiguousarray(matrix[lo:lo + block_rows], dtype=np.float32)
            self.matrix[lo:lo + len(block)] = torch.from_numpy(block).to(self.device, self.dtype)

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        torch = self.torch
        k = min(k, len(self))
        scores_out = np.empty((len(queries), k), dtype=np.float32)
        ids_out = np.empty((len(queries), k), dtype=np.int64)
        with torch.inference_mode():
            for qlo in range(0, len(queries), self.query_batch):
                q = torch.from_numpy(np.ascontiguousarray(queries[qlo:qlo + self.query_batch], dtype=np.float32))
                q = q.to(self.device, self.dtype)
                best_s: list[Any] = []
                best_i: list[Any] = []
                for lo in range(0, len(self), self.block_rows):
                    block = self.matrix[lo:lo + self.block_rows]
                    s, i = torch.topk(q @ block.T, min(k, len(block)), dim=1)
                    best_s.append(s.float())
                    best_i.append(i + lo)
                s, pick = torch.topk(torch.cat(best_s, 1), k, dim=1)
                i = torch.gather(torch.cat(best_i, 1), 1, pick)
                scores_out[qlo:qlo + len(q)] = s.cpu().numpy()
                ids_out[qlo:qlo + len(q)] = i.cpu().numpy()
        return scores_out, ids_out


def torch_topk(matrix: np.ndarray, queries: np.ndarray, k: int, device: str = "cuda",
               dtype: str = "float16") -> tuple[np.ndarray, np.ndarray]:
    """One-shot :class:`TorchExactSearch` (uploads the matrix each call; keep the object to reuse it)."""
    return TorchExactSearch(matrix, device=device, dtype=dtype).search(queries, k)
