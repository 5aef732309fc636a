"""The Prefect commands of docs/deployment.md against a real ``prefect server start`` on loopback: a process work
pool, ``build_dataset`` deployed from ``prefect.yaml``, a worker, one deployment run on documents of
the default corpus with replayed LLM answers, and the exported dataset checked against the in-process
build. Every process the test starts is stopped (its whole process group)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from rubricforge.jobs.tree import build_dataset as build_in_process
from support.net import free_port
from support.paths import ROOT
from support.replayed import KEEP_ALL, replay, rows

ROOT = ROOT
PREFECT = str(Path(sys.executable).with_name("prefect"))


def stop(proc: subprocess.Popen, first: int = signal.SIGINT, grace_s: float = 20) -> None:
    """Signal the process group the test started, then kill what is left of it."""
    if proc.poll() is None:
        os.killpg(proc.pid, first)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group: children (flow-run processes) included
    except ProcessLookupError:
        pass
    proc.wait(10)


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "prefect server exited"
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"prefect server at {url} not healthy after {timeout_s}s")


@pytest.mark.slow
def test_deployment_from_prefect_yaml_runs_on_a_real_server_and_worker(small_index_cfg, tmp_path):
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_ENABLED": "false", "HF_HUB_OFFLINE": "1"}
    env.pop("PREFECT_API_URL", None)
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    cfg = replay(small_index_cfg, tmp_path / "deployed", KEEP_ALL)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    logs = tmp_path / "logs"
    logs.mkdir()
    started: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> subprocess.Popen:
        with (logs / f"{name}.log").open("w") as out:
            proc = subprocess.Popen([PREFECT, *args], cwd=ROOT, env={**env, "PREFECT_API_URL": api}, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        return proc

    def prefect(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
        return subprocess.run([PREFECT, *args], cwd=ROOT, env={**env, "PREFECT_API_URL": api}, capture_output=True,
                              text=True, timeout=timeout)

    try:
        server = start("server", "server", "start", "--host", "127.0.0.1", "--port", str(port))
        wait_healthy(api, server)
        for args in (("work-pool", "create", "rubricforge", "--type", "process"),
                     ("--no-prompt", "deploy", "--name", "build-dataset")):
            done = prefect(*args)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        start("worker", "worker", "start", "--pool", "rubricforge", "--limit", "1")
        run = prefect("deployment", "run", "build_dataset/build-dataset", "--param", f"config_path={config}",
                      "--watch", "--watch-timeout", "420", timeout=480)
        worker_log = (logs / "worker.log").read_text()
        assert run.returncode == 0 and "Completed" in run.stdout, run.stdout[-3000:] + worker_log[-3000:]
    finally:
        for proc in reversed(started):
            stop(proc)
    assert all(proc.poll() is not None for proc in started)

    manifest = json.loads((Path(cfg.run_dir) / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["dataset_rows"] == 1  # the replayed build exports one row
    reference = build_in_process(replay(small_index_cfg, tmp_path / "in-process", KEEP_ALL), progress=False)
    assert rows(manifest["dataset_dir"]) == rows(reference.out)
