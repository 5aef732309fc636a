"""``rubricforge build`` through the flow as a user runs it: runner mistakes are one line (exit 2), a run
whose tree fails ends with one line naming it (exit 1) and its Prefect logs in the run directory, the
same command then resumes with the progress bar and summary and none of Prefect's log lines; with
``--executor local`` the same build runs in the CLI's process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from support.cli import assert_user_error, cli
from support.replayed import RECORDING, first_tree_recording, replay_args

RAY = importlib.util.find_spec("prefect_ray") is not None


@pytest.mark.parametrize("args, needles", [
    (["--runner", "spark"], ["runner.kind"]),
    (["--runner", "dask", "--address", "tcp://127.0.0.1:9"], ["Dask scheduler", "tcp://127.0.0.1:9", "dask scheduler"]),
    (["--runner", "ray", "--address", "ray://127.0.0.1:9"],
     ["Ray cluster", "ray://127.0.0.1:9"] if RAY else ["rubricforge[ray]"]),
    (["--workers", "0"], ["runner.workers"]),
])
def test_runner_mistakes_are_one_line_and_exit_code_2(args, needles, tmp_path):
    assert_user_error(cli("build", "--quiet", "--run-dir", str(tmp_path / "run"), *args), *needles)


def test_a_failed_tree_is_one_line_and_the_same_command_resumes(small_index_cfg, tmp_path):
    run = tmp_path / "run"
    failing = cli("build", "--quiet", "--run-dir", str(run),
                  *replay_args(small_index_cfg, first_tree_recording(small_index_cfg, tmp_path)))
    # a recording without the answer is a configuration mistake (issue 17): one line, exit 2, not retried
    assert failing.returncode == 2, failing.stderr[-3000:]
    [line] = failing.stderr.strip().splitlines()
    assert "no recorded response" in line
    log = (run / "logs" / "prefect.log").read_text()
    assert "Finished in state Failed" in log and "tree-0001" in log  # Prefect's logs went to the run directory
    kept = (run / "trees.jsonl").read_text()

    resumed = cli("build", "--run-dir", str(run), *replay_args(small_index_cfg, RECORDING))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "complete in" in resumed.stderr and "trees 2" in resumed.stderr and "2/2" in resumed.stderr
    assert "Finished in state" not in resumed.stderr and "| INFO" not in resumed.stderr
    assert (run / "trees.jsonl").read_text().startswith(kept) and kept.count("\n") == 1  # tree 0 kept, not redone


def test_the_same_build_runs_in_this_process_with_executor_local(small_index_cfg, tmp_path):
    """``run_job``'s other executor, from the CLI: the same job and result, and no Prefect at all."""
    run = tmp_path / "run"
    mistake = cli("build", "--quiet", "--executor", "spark", "--run-dir", str(run), *replay_args(small_index_cfg))
    assert_user_error(mistake, "unknown executor 'spark'", "local")
    local = cli("build", "--executor", "local", "--run-dir", str(run), *replay_args(small_index_cfg, RECORDING))
    assert local.returncode == 0, local.stderr[-3000:]
    assert "complete in" in local.stderr and "trees 2" in local.stderr
    assert not (run / "prefect").exists() and not (run / "logs" / "prefect.log").exists()


LOG_A_LINE = """
import logging, sys
from rubricforge.flows.session import route_logs
route_logs(sys.argv[1], verbose=sys.argv[2] == "1")
from prefect import flow  # noqa: F401  (Prefect reads the logging config now)
logging.getLogger("prefect").warning("a line for the run directory")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_prefect_logs_go_to_the_run_directory_and_with_verbose_to_the_terminal_too(verbose, tmp_path):
    proc = subprocess.run([sys.executable, "-c", LOG_A_LINE, str(tmp_path / "logs"), str(int(verbose))],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PREFECT_API_URL": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "a line for the run directory" in (tmp_path / "logs" / "prefect.log").read_text()
    assert ("a line for the run directory" in proc.stderr) == verbose
