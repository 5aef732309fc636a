"""The item-job base: resume skips finished keys, a failed item is not recorded, the settings guard refuses
a changed setting, and the rest of the items are cancelled when one raises."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.jobs.items import ItemJob
from rubricforge.rundir import StageLog


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
