"""The embedded model's first load and completion, tried in a child process: a crash of llama.cpp (a bad
kernel for this CPU, such as the AMX repacking bug) kills the child, not the run, and reaches the user as one
line naming the CPU features and the fix (exit 2).

A successful probe is remembered next to the model file (``<model>.probe.json``: llama-cpp-python's version,
the CPU's flags and the repack setting), so each machine pays the few seconds once. ``python -m
rubricforge.llm.native_probe PATH N_CTX N_THREADS REPACK`` is the child.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from rubricforge.errors import UserError

PROBE_TIMEOUT_S = 600.0
LOADED = "loaded"  # the child prints this once the model is in memory, before its completion
REPORTED_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
CHILD = ["-m", "rubricforge.llm.native_probe"]  # the child's interpreter arguments (a test may replace them)


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".probe.json")


def _fingerprint(repack: bool) -> dict[str, str | bool]:
    from rubricforge.llm.local_model import cpu_flags

    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    flags = " ".join(sorted(cpu_flags()))
    return {"llama_cpp_python": version, "cpu_flags_sha256": hashlib.sha256(flags.encode()).hexdigest(),
            "repack": repack}


def cpu_summary() -> str:
    """The CPU's model name and the flags that decide llama.cpp's kernels, e.g. ``Intel Xeon (avx2 amx_tile ...)``."""
    from rubricforge.llm.local_model import cpu_flags

    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            name = next((ln.partition(":")[2].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    flags = cpu_flags()
    features = " ".join(f for f in REPORTED_FLAGS if f in flags) or "no AVX2"
    return f"{name or 'this CPU'} ({features})"


def probe(path: Path, n_ctx: int, n_threads: int | None, repack: bool) -> None:
    """Load the GGUF at ``path`` and answer one short completion in a child process, unless that already
    succeeded on this machine with this llama.cpp build and ``repack``; raise a UserError when the child dies."""
    marker, fingerprint = _marker(path), _fingerprint(repack)
    try:
        if json.loads(marker.read_text()) == fingerprint:
            return
    except (OSError, ValueError):
        pass
    cmd = [sys.executable, *CHILD, str(path), str(n_ctx), str(n_threads or 0), "1" if repack else "0"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
    except subprocess.TimeoutExpired:
        raise UserError(f"the embedded model {path.name} did not answer a test completion in {PROBE_TIMEOUT_S:.0f} s "
                        f"on {cpu_summary()}", "set llm.<role>.n_threads, or use a model server "
                        "(llm.<role>.backend=litellm with api_base)") from None
    if done.returncode != 0:
        raise UserError(*crash_message(path.name, done.returncode, LOADED in done.stdout.split(), repack,
                                       done.stderr))
    tmp = marker.with_name(marker.name + f".tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(fingerprint))
        os.replace(tmp, marker)
    except OSError:  # a read-only model folder: the probe runs again next time
        pass


def crash_message(model: str, returncode: int, loaded: bool, repack: bool, stderr: str) -> tuple[str, str]:
    """The problem and fix of a child that ended with ``returncode`` (negative: killed by that signal)."""
    if returncode < 0:
        try:
            how = f"crashed ({signal.Signals(-returncode).name})"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        last = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "")
        how = f"failed (exit {returncode}{': ' + last[:160] if last else ''})"
    when = "on its first completion" if loaded else "while loading"
    problem = f"llama.cpp {how} {when} of the embedded model {model} on {cpu_summary()}"
    server = "; or run the model behind a server: llm.<role>.backend=litellm with api_base"
    if repack:
        return problem, f"load it without repacked weights: --set llm.<role>.repack=false{server}"
    return problem, ("rebuild llama-cpp-python for a generic x86-64 CPU: CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install "
                     f"--force-reinstall --no-cache-dir llama-cpp-python{server}")


def _child(argv: list[str]) -> None:
    from rubricforge.llm.local_model import load_llama

    path, n_ctx, n_threads, repack = argv
    llama = load_llama(path, int(n_ctx), int(n_threads) or None, repack == "1")
    print(LOADED, flush=True)
    llama.create_chat_completion(messages=[{"role": "user", "content": "Say OK."}], max_tokens=4, temperature=0.0)


if __name__ == "__main__":
    _child(sys.argv[1:])
