"""Configuration mistakes are one line and exit code 2, before any work (no retry loop, no "try a stronger
model", no traceback): the inputs that printed a traceback, and the LLM roles checked up front."""

from __future__ import annotations

import json

import pytest

from rubricforge.corpora.loaders import iter_json_lines
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.testing import FakeOpenAI
from support.cli import assert_user_error, cli
from support.reward_fixtures import EXAMPLE


def _no_work_done(run_dir) -> bool:
    return not (run_dir / "manifest.json").exists() and not (run_dir / "logs").exists()


@pytest.mark.parametrize("args, env, needles", [
    (["--set", "build.branching=[6,4"], {}, ["build.branching", "not valid YAML"]),
    ([], {"RUBRICFORGE_BUILD__N_TREES": "{1"}, ["build.n_trees", "not valid YAML"]),
    (["--set", "llm.generator.timeout_s=-1"], {}, ["llm.generator.timeout_s"]),
    (["--set", "llm.verifier.max_tokens=-5"], {}, ["llm.verifier.max_tokens"]),
    (["--set", "llm.judge.temperature=-0.5"], {}, ["llm.judge.temperature"]),
    (["--set", "tools.index_dir=/nonexistent/mistyped-index"], {}, ["tools.index_dir", "mistyped-index"]),
    (["--set", "llm.cache_path=/proc/rubricforge/cache.sqlite"], {}, ["LLM cache", "llm.cache_path"]),
    (["--set", "llm.generator.backend=litellm", "--set", "llm.generator.model=anthropic/claude-3-5-haiku-20241022"],
     {}, ["ANTHROPIC_API_KEY"]),
    (["--set", "llm.generator.backend=litellm", "--set", "llm.generator.model=openai/m",
      "--set", "llm.generator.api_key_env=RF_NO_SUCH_KEY"], {}, ["RF_NO_SUCH_KEY"]),
    (["--set", "llm.generator.backend=litellm", "--set", "llm.generator.model=nosuchprovider/m"], {},
     ["nosuchprovider/m", "provider"]),
    (["--set", "llm.generator.backend=litellm", "--set", "llm.generator.model=openai/m",
      "--set", "llm.generator.api_base=http://127.0.0.1:9/v1"], {}, ["api_base", "cannot be reached"]),
], ids=["yaml-in-set", "yaml-in-env", "timeout", "max-tokens", "temperature", "index-dir", "cache-path",
        "provider-key", "api-key-env", "unknown-provider", "unreachable-api-base"])
def test_config_mistakes_end_before_any_work(args, env, needles, tmp_path):
    run = tmp_path / "run"
    proc = cli("build", "-q", "--run-dir", str(run), *args, env=env)
    assert_user_error(proc, *needles)
    assert _no_work_done(run)


def test_a_model_the_server_does_not_serve_is_named_before_any_work(tmp_path):
    run = tmp_path / "run"
    with FakeOpenAI(models=["qwen3-8b"]) as server:
        proc = cli("build", "-q", "--run-dir", str(run), "--set", "llm.generator.backend=litellm",
                   "--set", "llm.generator.model=hosted_vllm/qwen3-B8", "--set", f"llm.generator.api_base={server.api_base}")
    assert_user_error(proc, "qwen3-B8", "not served", "qwen3-8b")
    assert server.n_requests == 0 and _no_work_done(run)


@pytest.mark.parametrize("content", [b"\xff\xfe\x00\x01binary\x00", b"build:\n  n_trees: 2\n  seed: \xe9\n"],
                         ids=["binary", "latin-1"])
def test_a_config_file_that_is_not_utf8_text(content, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    assert_user_error(cli("config", "--config", str(path)), str(path), "UTF-8")


def test_a_run_dir_that_is_a_file_or_unwritable(tmp_path):
    afile = tmp_path / "run"
    afile.write_text("not a folder")
    assert_user_error(cli("build", "-q", "--run-dir", str(afile)), str(afile), "is a file")
    assert_user_error(cli("build", "-q", "--run-dir", "/proc/rubricforge-run"), "/proc/rubricforge-run", "not writable")


def test_binary_responses_and_replay_files_are_user_errors(tmp_path):
    from rubricforge.llm.recording import load_recording
    from rubricforge.rewards.responses import load_responses

    binary = tmp_path / "responses.jsonl"
    binary.write_bytes(b'{"id": "a", "response": "x"}\n\x89PNG\r\n\x1a\n\x00\x00\xff\xd8')
    with pytest.raises(UserError, match="not UTF-8"):
        load_responses(binary, {}, Rejects())
    with pytest.raises(UserError, match="line 1 is not a recorded response"):
        load_recording(binary)


def test_non_utf8_corpus_lines_are_rejected_as_such(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"id": "1", "text": "fine"}\n{"id": "2", "text": "caf\xe9"}\n{"id": 3\n')
    rejects = Rejects()
    assert [n for n, _ in iter_json_lines(path, rejects)] == [1]
    assert rejects.by_reason == {"not UTF-8": 1, "invalid JSON": 1}


def test_a_directory_where_a_file_belongs_is_named_as_one(tmp_path):
    folder = tmp_path / "conf.d"
    folder.mkdir()
    assert_user_error(cli("config", "--config", str(folder)), str(folder), "is a directory, not a file")
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(json.dumps(EXAMPLE) + "\n")
    assert_user_error(cli("reward", "score", "-d", str(dataset), "-r", str(folder)),
                      f"responses file {folder} is a directory, not a file")


@pytest.mark.parametrize("queries", [[""], ["bees", "  "]], ids=["empty", "blank-second"])
def test_corpus_search_with_a_blank_query_exits_2(queries):
    assert_user_error(cli("corpus", "search", *queries), "is empty", "non-empty")


@pytest.mark.parametrize("job", ["tree", "kg"])
def test_the_python_api_checks_the_config_as_the_cli_does(job, tmp_path):
    """The jobs own their preflight: rf.build_dataset / rf.build_kg_dataset and rf.run_job under Prefect raise the
    CLI's UserError for a role whose key is missing, before any work (no Prefect server, no run directory)."""
    import rubricforge as rf

    run = tmp_path / "run"
    settings = ["llm.generator.backend=litellm", "llm.generator.model=openai/m", "llm.generator.api_key_env=RF_NO_SUCH_KEY"]
    proc = cli("build", "-q", "--source", job, "--run-dir", str(run), *(a for s in settings for a in ("--set", s)))
    assert_user_error(proc, "RF_NO_SUCH_KEY")
    cfg = rf.load_config(overrides=[f"run_dir={run}", *settings])
    for run_job in (rf.build_dataset if job == "tree" else rf.build_kg_dataset,
                    lambda c: rf.run_job(job, c, executor="prefect")):
        with pytest.raises(UserError) as err:
            run_job(cfg)
        assert f"error: {err.value}" == proc.stderr.strip() and _no_work_done(run)
