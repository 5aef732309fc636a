"""llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``, the
``llama-cpp-python[server]`` extra) serving the embedded 0.5B GGUF (the 1.5B passes too, about three times
slower), reached as ``openai/<alias>`` with ``api_base``: it refuses ``json_schema`` with HTTP 500, the
client steps down to ``json_object`` (with the schema, a grammar there) at once, ``llm check`` passes for
every role, and a build through it ends like the embedded build."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from rubricforge.config import Config
from rubricforge.llm.check import check_roles
from rubricforge.llm.local_model import ensure_model
from rubricforge.pipelines.tree.run import STAGES
from support.config import derive
from support.net import free_port
from support.paths import TESTS
from support.replayed import lines

pytestmark = pytest.mark.slow
MODEL = "qwen2.5-coder-0.5b-instruct-q4"
ALIAS = "qwen-0.5b"



@pytest.fixture(scope="module")
def api_base(tmp_path_factory):
    port = free_port()
    model = ensure_model(Config().llm.model_dir, MODEL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    log = tmp_path_factory.mktemp("llama-server") / "server.log"  # a file: llama.cpp's load log would fill a pipe
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "support.llama_server", "--model", str(model),
                                   "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
                                   "--n_ctx", "8192"], env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while True:
        assert server.poll() is None, f"the server exited: {log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"the server did not answer in 300 s: {log.read_text()[-2000:]}"
        try:
            if httpx.get(f"{base}/models", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(1)
    yield base
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _through(cfg: Config, api_base: str, **settings: str) -> Config:
    roles = [f"llm.{role}.{key}={value}" for role in ("generator", "verifier", "judge")
             for key, value in {"backend": "litellm", "model": f"openai/{ALIAS}", "api_base": api_base,
                                "max_retries": "1", **settings}.items()]
    return derive(cfg, *roles)


def test_llm_check_passes_for_every_role(api_base, tmp_path, caplog):
    cfg = derive(_through(Config(), api_base), f"llm.cache_path={tmp_path / 'cache.sqlite'}")
    started = time.monotonic()
    lines_, failed = asyncio.run(check_roles(cfg, ["generator", "verifier", "judge"]))
    assert failed == [] and all("-> ok" in line for line in lines_), lines_
    assert time.monotonic() - started < 120  # no 5 x backoff on the refusal
    assert any("refused structured output 'json_schema'" in r.getMessage() for r in caplog.records)


def test_a_build_through_the_server_ends_like_the_embedded_build(api_base, small_index_cfg, tmp_path):
    """As tests/jobs/test_build.py's real-model build, smaller: one tree (at most 2 nodes), one candidate, complete (a
    tree cut by an invalid answer is not rebuilt here: one build, as there)."""
    from rubricforge.jobs.tree import run_build

    cfg = derive(_through(small_index_cfg, api_base), "build.n_trees=1", "build.target_rows=0", "build.max_nodes=2",
                 "build.passages_per_node=1", "build.merge=stepwise", "build.invalid_answer_retries=0",
                 f"run_dir={tmp_path / 'run'}",
                 f"llm.cache_path={tmp_path / 'cache.sqlite'}")
    summary = run_build(cfg, progress=False)
    assert summary.status == "complete" and summary.trees == 1 and summary.candidates == 1, summary.to_dict()
    [tree] = [json.loads(line)["tree"] for line in lines(tmp_path / "run", "trees")]
    assert len(tree["nodes"]) + len(tree["dropped"]) >= 2
    assert all(lines(tmp_path / "run", name) for name in STAGES[:2])
    assert summary.ledger["requests"] > 0 and summary.ledger["failures"] < summary.ledger["calls"]
