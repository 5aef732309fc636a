"""The embedded local backend: the packaged GGUF assembled and sha256-verified once (a sidecar spares the
rehash), and the real model producing a schema-valid object under llama.cpp's JSON grammar."""

from __future__ import annotations

import asyncio
import os
from typing import Literal

import pytest
from pydantic import BaseModel

from rubricforge.config import LLMConfig
from rubricforge.errors import UserError
from rubricforge.llm import LLMClient, local_model


class Place(BaseModel):
    city: str
    country: str
    continent: Literal["Africa", "Asia", "Europe", "North America", "Oceania", "South America"]


@pytest.mark.slow
def test_real_local_model_returns_a_schema_valid_object(tmp_path):
    cfg = LLMConfig(cache_path=str(tmp_path / "cache.sqlite"))
    client = LLMClient(cfg)
    messages = [{"role": "user", "content": "Where is the Eiffel Tower? Give the city, country and continent as JSON."}]
    res = asyncio.run(client.generate("generator", messages, output=Place, stage="smoke", max_tokens=48))
    assert res.ok, res.error
    assert isinstance(res.value, Place) and Place.model_validate_json(res.text) == res.value
    assert res.usage["completion_tokens"] > 0 and res.usage["cost_usd"] == 0.0
    again = asyncio.run(LLMClient(cfg).generate("generator", messages, output=Place, stage="smoke", max_tokens=48))
    assert again.cached and again.value == res.value


SMALL = "qwen2.5-coder-0.5b-instruct-q4"  # the assembly is the same for every model: the smaller one is tested


def test_every_embedded_model_has_its_parts_installed_in_order_and_of_the_declared_size():
    for model in local_model.MODELS.values():
        parts = local_model.part_paths(model)
        assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, len(model.parts) + 1)]
        assert sum(p.stat().st_size for p in parts) == model.size
    assert local_model.DEFAULT_MODEL in local_model.MODELS
    with pytest.raises(UserError, match="not an embedded model"):
        local_model.ensure_model("/nonexistent", "qwen-7b")


@pytest.mark.slow
def test_model_is_assembled_once_verified_and_rehashed_only_when_the_file_changes(tmp_path, monkeypatch):
    hashed = []
    real_hash = local_model._hash_file
    monkeypatch.setattr(local_model, "_hash_file", lambda p: hashed.append(p) or real_hash(p))
    path = local_model.ensure_model(tmp_path, SMALL)
    assert path.stat().st_size == 491400064 and hashed == []  # hashed while assembling, not re-read
    assert local_model.ensure_model(tmp_path, SMALL) == path and hashed == []  # the sidecar vouches for it
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    local_model.ensure_model(tmp_path, SMALL)
    assert len(hashed) == 1  # changed mtime: verified again, once
    local_model.ensure_model(tmp_path, SMALL)
    assert len(hashed) == 1
    with path.open("r+b") as fh:  # damage the file: it is detected and rebuilt from the parts
        fh.seek(1000)
        fh.write(b"\0" * 16)
    local_model.ensure_model(tmp_path, SMALL)
    assert len(hashed) == 2 and local_model._hash_file(path) == local_model.MODELS[SMALL].sha256
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_unwritable_model_dir_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="llm.model_dir"):
        local_model.ensure_model(blocker / "models", SMALL)


SEGFAULT_AFTER_LOAD = ["-c", "import os, signal; print('loaded', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"]


def test_a_native_crash_of_the_probe_child_is_one_line_naming_the_cpu_and_the_fix(tmp_path, monkeypatch):
    from rubricforge.llm import native_probe

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(native_probe, "CHILD", SEGFAULT_AFTER_LOAD)
    with pytest.raises(UserError) as err:
        native_probe.probe(gguf, 512, 1, repack=True)
    line = str(err.value)
    assert "\n" not in line and "SIGSEGV" in line and "on its first completion" in line
    assert native_probe.cpu_summary() in line and "llm.<role>.repack=false" in line
    assert not (tmp_path / "model.gguf.probe.json").exists()  # a crash is never remembered as a success
    monkeypatch.setattr(native_probe, "CHILD", ["-c", "import sys; sys.exit(3)"])
    with pytest.raises(UserError, match="while loading") as err:
        native_probe.probe(gguf, 512, 1, repack=False)
    assert "GGML_NATIVE=OFF" in str(err.value)


def test_a_probe_that_succeeded_is_remembered_per_repack_setting(tmp_path, monkeypatch):
    from rubricforge.llm import native_probe

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(native_probe, "CHILD", ["-c", "print('loaded')"])
    native_probe.probe(gguf, 512, 1, repack=False)
    monkeypatch.setattr(native_probe, "CHILD", SEGFAULT_AFTER_LOAD)
    native_probe.probe(gguf, 512, 1, repack=False)  # remembered: the child is not run again
    with pytest.raises(UserError, match="SIGSEGV"):
        native_probe.probe(gguf, 512, 1, repack=True)  # another setting is probed anew


def test_llm_check_reports_a_crashing_embedded_model_as_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from rubricforge import cli
    from rubricforge.llm import native_probe

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(native_probe, "CHILD", SEGFAULT_AFTER_LOAD)
    monkeypatch.setattr(local_model, "ensure_model", lambda model_dir, name: gguf)
    monkeypatch.setattr("sys.argv", ["rubricforge", "llm", "check", "--role", "generator",
                                     "--set", f"llm.model_dir={tmp_path}", "--set", "llm.generator.repack=true"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("error: llama.cpp crashed (SIGSEGV) on its first completion")
    assert native_probe.cpu_summary() in err


def test_auto_repack_is_off_exactly_on_cpus_with_amx(monkeypatch):
    monkeypatch.setattr(local_model, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "amx_tile", "amx_int8"}))
    assert not local_model.repack_weights(None) and local_model.repack_weights(True)
    monkeypatch.setattr(local_model, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert local_model.repack_weights(None) and not local_model.repack_weights(False)
