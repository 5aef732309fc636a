"""FAISS indexes over normalised passage embeddings (inner product = cosine similarity).

Kinds (``index.kind``):

* ``exact`` — ``IndexFlatIP``: brute force, the reference for recall.
* ``hnsw`` — ``IndexHNSWFlat`` with ``METRIC_INNER_PRODUCT`` (``hnsw_m``, ``hnsw_ef_construction``;
  ``hnsw_ef_search`` at search time).
* ``ivfpq`` — ``IndexIVFPQ`` over an ``IndexFlatIP`` coarse quantizer, optionally behind an
  ``OPQMatrix`` rotation (``IndexPreTransform``). ``nlist`` defaults to ``4*sqrt(n)``, clamped to
  ``n/39`` so each list gets the 39 training points k-means asks for; PQ uses ``2**pq_nbits``
  centroids, clamped to the training sample (below 39 points per PQ centroid ``build_index`` logs
  one warning instead of FAISS' thousands). Trained on a seeded random sample of
  ``ivf_train_size`` vectors; ``ivf_nprobe`` lists are visited at search time. OPQ needs at least
  ``dim`` training vectors (FAISS 1.15 crashes below that, so it is refused).

Indexes are written atomically and read back with ``IO_FLAG_MMAP_IFC``: in FAISS 1.15 this
memory-maps the vector storage of flat and HNSW indexes and the inverted lists of IVF indexes
(measured: RSS grows by ~0 MB for a 292 MB flat index, by the graph only for HNSW).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rubricforge.config import IndexConfig
from rubricforge.errors import UserError
from rubricforge.extras import needs

if TYPE_CHECKING:
    import faiss

    from rubricforge.corpora.embedding import Shards

INDEX_FILE = "index.faiss"
MIN_POINTS_PER_CENTROID = 39  # faiss k-means warns below this
TRAIN_SEED = 0


def default_nlist(n: int) -> int:
    return max(1, min(round(4 * math.sqrt(n)), n // MIN_POINTS_PER_CENTROID))


def build_params(cfg: IndexConfig, n: int, dim: int) -> dict[str, Any]:
    """The resolved parameters that shape the index file (search-time knobs are not among them)."""
    if cfg.kind == "exact":
        return {"kind": "exact"}
    if cfg.kind == "hnsw":
        return {"kind": "hnsw", "m": cfg.hnsw_m, "ef_construction": cfg.hnsw_ef_construction}
    if dim % cfg.pq_m:
        divisors = [m for m in range(1, dim + 1) if dim % m == 0 and 4 <= m <= 128]
        raise UserError(f"index.pq_m={cfg.pq_m} does not divide the embedding dimension {dim}",
                        f"set index.pq_m to one of {divisors}")
    if n < 2 ** 4:
        raise UserError(f"ivfpq needs at least 16 passages, the corpus has {n}", "use index.kind=exact")
    nlist = min(cfg.ivf_nlist or default_nlist(n), n)
    train_size = min(n, cfg.ivf_train_size or max(50_000, 64 * nlist))
    if cfg.opq and train_size < dim:  # FAISS' OPQ training corrupts memory below this (seen in 1.15)
        raise UserError(f"index.opq needs at least {dim} training vectors, there are {train_size}",
                        "set index.opq=false, or raise index.ivf_train_size / use a larger corpus")
    nbits = min(cfg.pq_nbits, int(math.log2(train_size)))
    return {"kind": "ivfpq", "nlist": nlist, "pq_m": cfg.pq_m, "pq_nbits": nbits, "opq": cfg.opq,
            "train_size": train_size}


def new_index(params: dict[str, Any], dim: int) -> faiss.Index:
    with needs("index"):
        import faiss

    kind = params["kind"]
    if kind == "exact":
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, params["m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = params["ef_construction"]
        return index
    quantizer = faiss.IndexFlatIP(dim)
    # faiss' Python constructors keep references to the quantizer / sub-index, so nothing is freed early
    ivf = faiss.IndexIVFPQ(quantizer, dim, params["nlist"], params["pq_m"], params["pq_nbits"],
                           faiss.METRIC_INNER_PRODUCT)
    ivf.pq.cp.min_points_per_centroid = 1  # a small sample is deliberate here; build_index warns once instead
    if not params["opq"]:
        return ivf
    opq = faiss.OPQMatrix(dim, params["pq_m"])
    opq.pq = ivf.pq  # OPQ starts from a PQ shaped like the index's (owned by ivf, which outlives training)
    return faiss.IndexPreTransform(opq, ivf)


def undertrained(params: dict[str, Any]) -> bool:
    """True when the IVF-PQ sample is below what FAISS' k-means asks for (39 points per centroid)."""
    return params["kind"] == "ivfpq" and params["train_size"] < MIN_POINTS_PER_CENTROID * 2 ** params["pq_nbits"]


def build_faiss_index(params: dict[str, Any], shards: Shards, on_rows: Callable[[int], None] | None = None) -> faiss.Index:
    """Train (IVF-PQ: on a seeded sample) and add every shard, in order."""
    index = new_index(params, shards.dim)
    if not index.is_trained:
        rng = np.random.default_rng(TRAIN_SEED)
        sample = np.sort(rng.choice(shards.n_rows, size=params["train_size"], replace=False))
        index.train(np.ascontiguousarray(shards.rows(sample), dtype=np.float32))
    for vectors in shards:
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        if on_rows:
            on_rows(len(vectors))
    return index


def set_search_params(index: faiss.Index, ef_search: int | None = None, nprobe: int | None = None) -> None:
    with needs("index"):
        import faiss

    if ef_search is not None and hasattr(index, "hnsw"):
        index.hnsw.efSearch = ef_search
    if nprobe is not None:
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf.nprobe = nprobe


def save(index: faiss.Index, path: str | Path) -> None:
    with needs("index"):
        import faiss

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, path)


def load(path: str | Path, mmap: bool = True) -> faiss.Index:
    with needs("index"):
        import faiss

    return faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC if mmap else 0)


def flat_vectors(index: faiss.Index) -> np.ndarray:
    """A zero-copy ``(ntotal, d)`` view of an exact index's vectors (memory-mapped when loaded so)."""
    with needs("index"):
        import faiss

    if not isinstance(index, faiss.IndexFlat):
        raise TypeError(f"flat_vectors needs an IndexFlat, got {type(index).__name__}")
    if index.ntotal == 0:
        return np.empty((0, index.d), dtype=np.float32)
    return np.asarray(faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d)).reshape(index.ntotal, index.d)
