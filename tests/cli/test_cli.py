"""The command line as a user runs it: a subprocess of the installed entry point, exit codes, one-line
errors without tracebacks, and ``build`` / ``view`` on the replayed main job."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rubricforge.testing import FakeOpenAI, Reply
from support.cli import assert_user_error, cli
from support.paths import ROOT
from support.replayed import replay_args


def test_help_lists_the_commands():
    proc = cli("--help")
    assert proc.returncode == 0
    for command in ("build", "view", "corpus", "llm", "config"):
        assert command in proc.stdout


def test_help_does_not_import_heavy_modules():
    code = ("import sys; from rubricforge import cli; "
            "print(sorted(m for m in ('torch', 'faiss', 'llama_cpp', 'litellm', 'datasets', 'sentence_transformers', "
            "'prefect', 'dask', 'distributed') "
            "if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


@pytest.mark.parametrize("args, needles", [
    (["build", "--set", "build.max_depth=0"], ["build.max_depth"]),
    (["build", "--set", "build.branching=[6,0]"], ["build.branching"]),
    (["build", "--config", "no-such.yaml"], ["no-such.yaml", "--config"]),
    (["build", "--rubric-source", "oracle"], ["build.rubric_source"]),
    (["build", "--push-to-hub", "not/a/repo"], ["not/a/repo"]),
    (["view", "no-such-run"], ["no-such-run"]),
    (["llm", "check", "--role", "critic"], ["critic", "generator, verifier, judge"]),
    (["corpus", "build", "--source", "jsonl", "--path", "missing.jsonl"], ["missing.jsonl"]),
])
def test_bad_input_is_one_line_and_exit_code_2(args, needles, tmp_path):
    proc = cli(*args, "--set", f"run_dir={tmp_path / 'run'}") if args[0] == "build" else cli(*args)
    assert_user_error(proc, *needles)


def test_a_missing_api_key_is_named(tmp_path):
    proc = cli("llm", "check", "--role", "judge", "--set", "llm.judge.backend=litellm",
               "--set", "llm.judge.model=openai/gpt-4o-mini", "--set", "llm.judge.api_key_env=RF_TEST_NO_SUCH_KEY",
               "--set", f"llm.cache_path={tmp_path / 'c.sqlite'}", env={"RF_TEST_NO_SUCH_KEY": ""})
    assert_user_error(proc, "RF_TEST_NO_SUCH_KEY")


def test_llm_check_exits_1_when_a_role_gives_no_valid_answer(tmp_path):
    with FakeOpenAI([Reply(content="Paris, of course.")]) as server:  # never the JSON asked for
        good = ["--set", f"llm.cache_path={tmp_path / 'c.sqlite'}", "--set", "llm.judge.backend=litellm",
                "--set", "llm.judge.model=openai/fake-model", "--set", f"llm.judge.api_base={server.api_base}",
                "--set", "llm.judge.backoff_s=0.01"]
        proc = cli("llm", "check", "--role", "judge", *good)
    assert proc.returncode == 1 and "judge: backend=litellm" in proc.stdout and "FAILED" in proc.stdout
    assert proc.stderr.strip().splitlines() == ["failed: 1 of 1 roles gave no valid answer (judge); see above"]


def test_build_then_view_on_replayed_answers(small_index_cfg, tmp_path):
    run = tmp_path / "run"
    proc = cli("build", "--run-dir", str(run), "--quiet", *replay_args(small_index_cfg))
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = json.loads((run / "manifest.json").read_text())
    assert f"dataset rows {manifest['dataset_rows']}" in proc.stderr
    assert str(run / "dataset") in proc.stderr and "viewer:" in proc.stderr
    viewer = run / "viewer" / "index.html"
    viewer.unlink()
    proc = cli("view", str(run))
    assert proc.returncode == 0 and proc.stdout.strip() == str(viewer) and viewer.stat().st_size > 1000


def test_readme_opens_with_the_two_make_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make run", "make test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci


@pytest.mark.parametrize("args", [["build", "--bogus"], ["config", "show"], ["reward", "score"]])
def test_usage_errors_are_short_and_exit_code_2(args):
    proc = cli(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "Error:" in proc.stderr
