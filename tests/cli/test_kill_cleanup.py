"""After SIGKILL of ``rubricforge build`` nothing of that run stays alive: Prefect's temporary server (and
anything else the CLI started) dies with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from rubricforge.testing import FakeOpenAI, Reply
from support.cli import ENTRY


def _wait(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")
def test_sigkill_of_build_leaves_no_prefect_server_behind(small_index_cfg, tmp_path):
    c = small_index_cfg
    with FakeOpenAI([Reply(delay_s=60)], keep_requests=False) as server:  # calls hang: the build is mid-run
        role = ["backend=litellm", "model=openai/fake-model", f"api_base={server.api_base}"]
        sets = [f"llm.{r}.{kv}" for r in ("generator", "verifier") for kv in role]
        sets += ["corpus.source=jsonl", f"corpus.path={c.corpus.path}", "corpus.fields.topic=topic",
                 f"tools.index_dir={c.tools.index_dir}", f"llm.cache_path={tmp_path / 'cache.sqlite'}",
                 "build.n_trees=1"]
        command = [str(ENTRY)] if ENTRY.exists() else [sys.executable, "-m", "rubricforge.cli"]
        args = [*command, "build", "-q", "--run-dir", str(tmp_path / "run"), *(a for s in sets for a in ("--set", s))]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
        cli = psutil.Process(proc.pid)
        try:
            assert _wait(lambda: server.n_requests > 0, 240), "the build never reached the model"
            children = cli.children(recursive=True)
            assert any("uvicorn" in " ".join(p.cmdline()) for p in children)  # Prefect's temporary server
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert _wait(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in children), 30), \
            [" ".join(p.cmdline())[:120] for p in children if p.is_running()]
