"""build.target_rows: trees are started in seed order until enough rows are retained (TreeQuota), in process."""

from __future__ import annotations

import asyncio

import pytest

from rubricforge.config import Config
from rubricforge.pipelines.tree.run import TreeQuota, run_trees
from rubricforge.pipelines.tree.seeds import Seed
from support.config import derive


class FakeWorker:
    """Answers each seed's tree with the given retained flag after a short pause; keeps the order and the most
    trees in flight at once."""

    def __init__(self, retained: list[bool]):
        self.retained, self.started, self.in_flight, self.most = retained, [], 0, 0

    async def run(self, seed: Seed) -> bool:
        self.started.append(seed.index)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.01 * (1 + seed.index % 3))
        self.in_flight -= 1
        return self.retained[seed.index]


def seeds(n: int) -> list[Seed]:
    return [Seed(index=i, passage_id=f"p{i}", doc_id=f"d{i}", title=f"t{i}", topic="", query=f"t{i}") for i in range(n)]


def build(retained: list[bool], *overrides: str) -> FakeWorker:
    cfg = derive(Config(), *overrides)
    worker = FakeWorker(retained)
    assert asyncio.run(run_trees(worker.run, seeds(cfg.build.tree_cap()), cfg)) == []
    return worker


def test_one_row_wanted_builds_one_tree_at_a_time_until_the_first_row():
    worker = build([False, False, True, True, True])
    assert worker.started == [0, 1, 2] and worker.most == 1


def test_more_rows_wanted_keep_trees_in_flight_up_to_the_rows_still_missing():
    worker = build([True, False, True, False, True, True, True, True], "build.target_rows=4", "build.tree_concurrency=3")
    assert sum(worker.retained[i] for i in worker.started) >= 4 and worker.most == 3
    assert worker.started == list(range(len(worker.started)))  # in seed order, none skipped


def test_n_trees_are_built_even_when_the_rows_came_sooner_and_max_trees_caps_a_run_without_rows():
    assert build([True] * 6, "build.n_trees=4", "build.tree_concurrency=2").started == [0, 1, 2, 3]
    assert build([False] * 12, "build.max_trees=5").started == [0, 1, 2, 3, 4]
    assert build([False] * 12, "build.target_rows=0", "build.n_trees=3").started == [0, 1, 2]


def test_the_default_cap_is_ten_trees_per_wanted_row_and_max_trees_below_n_trees_is_refused():
    assert Config().build.tree_cap() == 10 and derive(Config(), "build.n_trees=30").build.tree_cap() == 30
    with pytest.raises(Exception, match="max_trees"):
        derive(Config(), "build.n_trees=5", "build.max_trees=3")


def test_stage_runs_without_verdicts_ignore_the_row_target():
    quota = TreeQuota(Config(), stages=["trees"])
    quota.start()
    assert not quota.may_start(0)  # n_trees=1 built: a tree alone never makes a row


def test_a_tree_whose_calls_failed_is_not_replaced_by_another_seed():
    from rubricforge.llm.errors import Unavailable

    class Failing(FakeWorker):
        async def run(self, seed: Seed) -> bool:
            self.started.append(seed.index)
            raise Unavailable(f"tree-{seed.index}: HTTP 429")

    cfg = derive(Config(), "build.n_trees=3", "build.tree_concurrency=3")
    worker = Failing([False] * 10)
    assert len(asyncio.run(run_trees(worker.run, seeds(cfg.build.tree_cap()), cfg))) == 3
    assert sorted(worker.started) == [0, 1, 2]  # the re-run redoes these three; no fourth seed in their place
