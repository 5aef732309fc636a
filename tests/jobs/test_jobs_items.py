"""The item-job base: resume skips finished keys, a failed item is not recorded, the settings guard refuses
a changed setting, the rest of the items are cancelled when one raises, and a budget stop ends every item job
the same way."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rubricforge.cli import app
from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.jobs.base import STOPPED_EXIT
from rubricforge.jobs.items import ItemJob
from rubricforge.io.stagelog import StageLog
from rubricforge.testing import FakeOpenAI
from support.llm_fakes import litellm_llm_config
from support.net import free_port
from support.pref_fakes import PREFS_JUDGE, REPORT_WRITER
from support.reward_fixtures import EXAMPLE, ROLLOUT, SCRIPTED_JUDGE


class Square(ItemJob[int]):
    stage = "squares"

    def __init__(self, log: StageLog[Any], model: str = "m", fail: int | None = None):
        super().__init__(log, Config().llm, concurrency=2)
        self.model, self.fail = model, fail
        self.seen: list[int] = []

    def key(self, item: int) -> str:
        return str(item)

    def settings(self) -> dict[str, Any]:
        return {"model": self.model}

    async def process(self, item: int) -> dict[str, Any]:
        self.seen.append(item)
        if item == self.fail:
            raise RuntimeError(f"item {item} failed")
        await asyncio.sleep(0.01 * item)
        return {"value": item * item}


def test_resume_skips_finished_keys_and_a_failed_item_is_not_finished(tmp_path):
    log: StageLog[Any] = StageLog(tmp_path / "squares.jsonl")
    with pytest.raises(RuntimeError, match="item 1 failed"):
        asyncio.run(Square(log, fail=1).arun([0, 1, 2, 3, 3], progress=False))
    assert "1" not in StageLog(tmp_path / "squares.jsonl")
    again = Square(StageLog(tmp_path / "squares.jsonl"))
    done_before = set(StageLog(tmp_path / "squares.jsonl").keys())
    stats = asyncio.run(again.arun([0, 1, 2, 3, 3], progress=False))
    assert set(again.seen) == {0, 1, 2, 3} - {int(k) for k in done_before} and 1 in again.seen
    assert (stats.items, stats.done_before, stats.done_now) == (4, len(done_before), 4 - len(done_before))
    assert {k: r["value"] for k, r in StageLog(tmp_path / "squares.jsonl")._done.items()} == {
        "0": 0, "1": 1, "2": 4, "3": 9}


def test_a_failure_cancels_the_items_still_running(tmp_path):
    log: StageLog[Any] = StageLog(tmp_path / "squares.jsonl")
    with pytest.raises(RuntimeError):
        asyncio.run(Square(log, fail=0).arun([0, 50, 60], progress=False))
    assert len(StageLog(tmp_path / "squares.jsonl")) == 0  # 50 and 60 (0.5 s, 0.6 s) were cancelled, not finished


def test_settings_guard_refuses_a_changed_setting(tmp_path):
    log: StageLog[Any] = StageLog(tmp_path / "squares.jsonl")
    asyncio.run(Square(log, model="a").arun([1], progress=False))
    with pytest.raises(UserError, match=r"other settings \(model: 'a' -> 'b'\)"):  # the CLI: one line, exit 2
        asyncio.run(Square(StageLog(tmp_path / "squares.jsonl"), model="b").arun([1, 2], progress=False))
    asyncio.run(Square(StageLog(tmp_path / "squares.jsonl"), model="a").arun([1, 2], progress=False))


def _score(tmp_path: Path) -> tuple[list[str], Path, Path | None]:
    dataset, responses = tmp_path / "data.jsonl", tmp_path / "responses.jsonl"
    dataset.write_text(json.dumps(EXAMPLE) + "\n")
    responses.write_text("".join(json.dumps({"id": "ex1", "response": ROLLOUT.replace("Paris", f"Paris ({i})")}) + "\n"
                                 for i in range(3)))  # three different prompts: no cache hit
    return (["reward", "score", "-d", str(dataset), "-r", str(responses), "--rewards", "rubric"],
            tmp_path / "responses.scores.summary.json", tmp_path / "responses.scores.run" / "manifest.json")


def _rubrics(tmp_path: Path) -> tuple[list[str], Path, Path | None]:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Compare DNS resolvers {i}."}) + "\n"
                               for i in range(3)))
    return ["rubrics", "generate", "-d", str(dataset), "--out", str(tmp_path / "out.jsonl")], tmp_path / "out.jsonl", None


def _report(tmp_path: Path) -> tuple[list[str], Path, Path | None]:
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": i, "query": f"Compare DNS resolvers {i}."}) + "\n" for i in range(3)))
    return (["build", "--source", "report", "--queries", str(queries)],
            tmp_path / "run" / "report" / "data.jsonl", tmp_path / "run" / "report" / "manifest.json")


@pytest.mark.parametrize("job, stages", [(_score, SCRIPTED_JUDGE), (_rubrics, PREFS_JUDGE), (_report, REPORT_WRITER)])
def test_a_budget_stop_writes_what_is_finished_and_exits_3(job, stages, tmp_path):
    """The one budget rule (jobs/base.py) for every item job: the output of the finished items is written, the
    command says ``stopped`` and exits STOPPED_EXIT (the manifest of a job with a run directory says so too), and
    the same command with a larger budget finishes."""
    args, output, manifest = job(tmp_path)
    with FakeOpenAI(stages=stages) as server:
        llm = litellm_llm_config(tmp_path, server, concurrency=1)
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "llm": {**llm, "max_tokens": 1},
                                          "reward": {"concurrency": 1}}))
        res = CliRunner().invoke(app, [*args, "-c", str(config), "-q"])
        assert res.exit_code == STOPPED_EXIT, res.output
        assert "stopped: LLM budget reached" in res.output and output.exists()
        if manifest is not None:
            stopped = json.loads(manifest.read_text())
            assert stopped["status"].startswith("stopped: LLM budget reached") and stopped["ledger"]["total"]["calls"]
        config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "llm": llm, "reward": {"concurrency": 1}}))
        res = CliRunner().invoke(app, [*args, "-c", str(config), "-q"])
    assert res.exit_code == 0 and "stopped" not in res.output, res.output
    if manifest is not None:
        done = json.loads(manifest.read_text())
        counts = done["counts"]
        assert done["status"] == "complete" and len(done["invocations"]) == 2
        assert counts["done_before"] + counts["done_now"] == counts["items"] == 3
        assert done["models"] and (manifest.parent / "config.yaml").exists()


def test_an_item_job_checks_its_llm_roles_before_any_work(tmp_path):
    args, output, manifest = _score(tmp_path)
    role = {"backend": "litellm", "model": "openai/fake-model", "api_base": f"http://127.0.0.1:{free_port()}/v1"}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"llm": {"judge": role, "cache_path": str(tmp_path / "cache.sqlite")}}))
    res = CliRunner().invoke(app, [*args, "-c", str(config), "-q"])
    assert isinstance(res.exception, UserError) and "llm.judge.api_base" in str(res.exception)
    assert "cannot be reached" in str(res.exception) and not output.exists() and not manifest.parent.exists()
