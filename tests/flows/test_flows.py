"""The Prefect flows on a Prefect test server (one per session): the replayed main job as a flow matches the
in-process build, resumes from the cache and the run directory, runs the same on a two-worker Dask
LocalCluster whose workers have another working directory and HOME, keeps LLM concurrency within the per-model
limit across workers, and fails with the failing tree named while keeping finished work."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from rubricforge.config import Config
from rubricforge.errors import BudgetExceeded, UserError
from rubricforge.jobs.tree import build_dataset as build_in_process
from support.config import derive
from support.replayed import KEEP_ALL, first_tree_recording, lines, replay, rows

pytestmark = pytest.mark.usefixtures("prefect_server")


def config_file(cfg: Config, path: Path) -> str:
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    return str(path)


def run_flow(cfg: Config, tmp: Path, **kwargs):
    from rubricforge.flows.tree import build_dataset

    return build_dataset(config_file(cfg, tmp / f"{Path(cfg.run_dir).name}.yaml"), **kwargs)


def stage_records(run_dir: Path) -> dict[str, list]:
    return {name: sorted((json.loads(x) for x in lines(run_dir, name)), key=lambda r: r["key"])
            for name in ("trees", "candidates", "verdicts")}


def tree_task_runs(state: str, name: str | None = None) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (TaskRunFilter, TaskRunFilterName, TaskRunFilterState,
                                                TaskRunFilterStateName)

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(task_run_filter=TaskRunFilter(
            name=TaskRunFilterName(like_=name or "tree-"), state=TaskRunFilterState(name=TaskRunFilterStateName(
                any_=[state]))), limit=200)
    return [r for r in runs if name is None or r.name == name]


@pytest.fixture(scope="module")
def threads(small_index_cfg, tmp_path_factory):
    """The replayed build in process and as a flow on the thread runner."""
    root = tmp_path_factory.mktemp("flows")
    direct = build_in_process(replay(small_index_cfg, root / "direct", KEEP_ALL), progress=False)
    cfg = replay(small_index_cfg, root / "threads", KEEP_ALL)
    return {"direct": direct, "flow": run_flow(cfg, root), "cfg": cfg, "root": root}


def test_build_dataset_flow_matches_the_in_process_build(threads):
    flow, direct = threads["flow"], threads["direct"]
    assert flow.summary.status == "complete" and flow.summary.computed_now["trees"] == 2
    assert flow.rows == direct.rows == 1  # tree 0's candidate fails the rule checks; tree 1's recorded KEEP
    assert rows(flow.out) == rows(direct.out)
    assert flow.summary.ledger["calls"] == direct.summary.ledger["calls"] > 0
    run = Path(flow.summary.run_dir)
    assert stage_records(run) == stage_records(Path(direct.summary.run_dir))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["dataset_rows"] == 1
    assert len(list((run / "prefect" / "results").iterdir())) == 2  # one persisted result per tree


def test_a_second_flow_run_answers_the_trees_from_the_cache(threads):
    before = len(tree_task_runs("Cached"))
    again = run_flow(threads["cfg"], threads["root"])
    assert len(tree_task_runs("Cached")) == before + 2  # both tree tasks: no work, no LLM call
    assert again.summary.computed_now == {} and again.summary.ledger.get("calls", 0) == 0
    assert rows(again.out) == rows(threads["flow"].out)


def test_the_cli_flow_path_checks_a_push_once_and_reads_each_stage_log_once_after_the_trees(threads, tmp_path,
                                                                                           monkeypatch):
    """`rubricforge build` (the flow, on threads) on a finished run: the job's preflight is the one check of the
    Hub push; each stage log is read by the resuming tree worker and once more, after the trees, for the finish
    and the export together (they were read once each, and the push checked three times)."""
    import shutil

    import rubricforge.io.stagelog as stagelog
    from rubricforge.export import hub
    from rubricforge.flows import local

    run = tmp_path / "again"
    shutil.copytree(Path(threads["flow"].run_dir), run)
    reads: dict[str, int] = {}
    lines_of, check_of = stagelog._lines, hub.check_push
    checks, pushed = [], []

    def counted(path):
        reads[path.name] = reads.get(path.name, 0) + 1
        return lines_of(path)

    monkeypatch.setattr(stagelog, "_lines", counted)
    monkeypatch.setattr(hub, "check_push", lambda repo: checks.append(repo) or check_of(repo))
    monkeypatch.setattr(hub, "push", lambda repo, configs, card, token: pushed.append((repo, token)))
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    result = local.run_build_dataset(replay(threads["cfg"], run, KEEP_ALL), push_to_hub="org/rubrics", progress=False)
    assert result.summary.computed_now == {} and result.pushed_to == "org/rubrics"
    assert checks == ["org/rubrics"] and pushed == [("org/rubrics", "hf_test_token")]
    assert {name: reads.get(f"{name}.jsonl") for name in ("trees", "candidates", "verdicts")} == {
        "trees": 2, "candidates": 2, "verdicts": 2}


def test_ray_workers_build_the_same_dataset_as_threads(threads, monkeypatch, prefect_server):
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)  # the worker processes report here
    cfg = derive(threads["cfg"], f"run_dir={threads['root'] / 'ray'}", "runner.kind=ray", "runner.workers=2")
    scaled = run_flow(cfg, threads["root"])
    assert scaled.summary.status == "complete" and scaled.summary.computed_now["trees"] == 2
    assert rows(scaled.out) == rows(threads["flow"].out)
    assert stage_records(Path(cfg.run_dir)) == stage_records(Path(threads["cfg"].run_dir))
    assert scaled.summary.ledger["calls"] == threads["flow"].summary.ledger["calls"]  # summed over the workers


def test_dask_workers_in_another_directory_and_home_build_the_same_dataset_as_threads(threads, monkeypatch,
                                                                                       prefect_server, tmp_path):
    """The run directory and the index are given relative to the driver's working directory; the Dask
    workers run in another one, with another HOME. The driver resolves the paths, each worker writes its own
    shard of the stage logs, and the flow merges them into the same logs and dataset as the thread runner's."""
    from distributed import Client, LocalCluster

    monkeypatch.setenv("PREFECT_API_URL", prefect_server)  # the worker processes report here
    driver, elsewhere = tmp_path / "driver", tmp_path / "elsewhere"
    driver.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(driver)
    index = os.path.relpath(threads["cfg"].tools.index_dir, driver)
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None,
                      env={"HOME": str(elsewhere)}) as cluster, Client(cluster) as client:
        client.run(os.chdir, str(elsewhere))
        assert set(client.run(os.getcwd).values()) == {str(elsewhere)}
        assert set(client.run(os.path.expanduser, "~").values()) == {str(elsewhere)}
        cfg = derive(threads["cfg"], "run_dir=runs/dask", f"tools.index_dir={index}", "runner.kind=dask",
                     f"runner.address={cluster.scheduler_address}", "build.tree_concurrency=2")
        scaled = run_flow(cfg, tmp_path)
    run = driver / "runs" / "dask"
    assert scaled.summary.run_dir == str(run) and not (elsewhere / "runs").exists()
    assert scaled.summary.status == "complete" and scaled.summary.computed_now["trees"] == 2
    assert rows(scaled.out) == rows(threads["flow"].out)
    assert stage_records(run) == stage_records(Path(threads["cfg"].run_dir))
    assert not list(run.glob("*.shards"))  # every worker's shard was merged into its log
    assert scaled.summary.ledger["calls"] == threads["flow"].summary.ledger["calls"]  # summed over the workers


def test_a_configuration_mistake_in_a_tree_fails_the_run_at_once_and_the_rerun_resumes(small_index_cfg, threads,
                                                                                        tmp_path):
    one = first_tree_recording(small_index_cfg, tmp_path)
    cfg = replay(small_index_cfg, tmp_path / "run", KEEP_ALL, "runner.retry_delay_s=0", recording=one)
    with pytest.raises(UserError) as err:  # the CLI's exit 2, not a failed run to retry
        run_flow(cfg, tmp_path)
    message = str(err.value)
    assert "no recorded response" in message and "\n" not in message
    [failed] = tree_task_runs("Failed", "tree-0001")[-1:]
    assert failed.run_count == 1  # a configuration mistake fails the same way again: not retried
    run = Path(cfg.run_dir)
    assert [json.loads(x)["key"] for x in lines(run, "trees")] == ["tree-0000"]  # finished work kept
    status = json.loads((run / "manifest.json").read_text())["status"]
    assert status.startswith("failed: 1 items failed; re-run the same command to retry them (first: tree-0001: ReplayMiss")
    # the recording is fixed: the same flow resumes, tree 0 from the cache, tree 1 computed
    resumed = run_flow(derive(cfg, f"llm.replay_path={threads['cfg'].llm.replay_path}"), tmp_path)
    assert resumed.summary.status == "complete" and resumed.summary.computed_now["trees"] == 1
    assert rows(resumed.out) == rows(threads["flow"].out)


@pytest.mark.parametrize("error, runs", [(BudgetExceeded("LLM budget reached", "raise llm.max_tokens"), 1),
                                         (RuntimeError("provider down"), 3)])
def test_the_kg_task_is_retried_except_after_a_budget_stop(error, runs, monkeypatch, tmp_path):
    """A retry after a budget stop would start a fresh ledger and spend the budget again."""
    import rubricforge.flows.kg as kg_flow

    attempts = []

    def stages(cfg: Config, progress: bool):
        attempts.append(cfg.run_dir)
        raise error

    monkeypatch.setattr(kg_flow, "run_kg", stages)
    cfg = derive(Config(), f"run_dir={tmp_path / 'kg'}", "runner.task_retries=2")
    with pytest.raises(type(error)):
        kg_flow.build_kg_dataset(config=cfg)
    assert attempts == [str(tmp_path / "kg")] * runs


# ---------------------------------------------------------------- LLM limits across workers


async def _calls(cfg: Config, calls: dict[str, int]) -> None:
    from rubricforge.flows.limits import registry
    from rubricforge.llm import LLMClient

    client = LLMClient(cfg.llm, limits=registry(cfg))
    try:  # the prompt's first word is the role: the fake server counts requests in flight per role by it
        await asyncio.gather(*(client.generate(role, [{"role": "user", "content": f"{role} q{i}"}])
                               for role, n in calls.items() for i in range(n)))
    finally:
        await client.aclose()


def burst(cfg: Config, calls: dict[str, int]) -> None:
    """One task's worth of parallel LLM calls (``calls``: how many per role), each task with its own client (as
    separate workers have)."""
    asyncio.run(_calls(cfg, calls))


def llm_flow(cfg: Config, tasks: int, calls: dict[str, int]) -> None:
    from prefect import flow, task, unmapped
    from prefect.futures import wait

    from rubricforge.flows.limits import ensure_limits, shared
    from rubricforge.flows.runners import task_runner

    @flow(name="llm-burst", task_runner=task_runner(cfg.runner))
    def bursts() -> None:
        if shared(cfg):
            ensure_limits(cfg)
        futures = task(burst).map(unmapped(cfg), [calls] * tasks)
        wait(futures)
        for f in futures:
            f.result()

    bursts()


def test_llm_concurrency_stays_within_the_model_limit_across_dask_workers(monkeypatch, prefect_server, tmp_path):
    import cloudpickle

    from rubricforge.testing import FakeOpenAI, Reply
    from support.llm_fakes import litellm_llm_config

    monkeypatch.setenv("PREFECT_API_URL", prefect_server)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    with FakeOpenAI([Reply('{"capital": "Paris"}')], keep_requests=False, hold=2, expected=12) as server:
        data = Config().model_dump(mode="json")
        data["llm"].update(litellm_llm_config(tmp_path, server, concurrency=2, timeout_s=120))  # > a held request's wait
        data["llm"]["cache_path"] = ""
        data["runner"] = {"kind": "dask", "workers": 2}
        cfg = Config.model_validate(data)
        llm_flow(cfg, tasks=6, calls={"generator": 2})
        assert server.n_requests == 12
        assert server.max_in_flight == 2  # the limit, reached and never exceeded by 2 workers x 2 threads x 2 calls
        server.hold(3, 12)  # answered only once 3 are in flight: reached when the limit does not hold across workers
        llm_flow(derive(cfg, "runner.llm_limits=process"), tasks=6, calls={"generator": 2})
        assert server.max_in_flight > 2  # per-process limits alone do not hold across tasks and workers


def test_each_roles_limit_holds_across_dask_workers_when_roles_share_a_model_and_server(monkeypatch, prefect_server,
                                                                                         tmp_path):
    """Prefect's global limits are per role: the generator's 1 and the verifier's 3 hold on one model and server."""
    import cloudpickle

    from rubricforge.testing import FakeOpenAI, Reply
    from support.llm_fakes import litellm_llm_config

    monkeypatch.setenv("PREFECT_API_URL", prefect_server)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    calls = {"generator": 1, "verifier": 3}  # as the limits: every round of 4 answers has both roles' requests
    with FakeOpenAI([Reply('{"capital": "Paris"}')], keep_requests=False, hold=4, expected=16) as server:
        data = Config().model_dump(mode="json")
        data["llm"].update(litellm_llm_config(tmp_path, server, timeout_s=120))  # > a held request's wait
        data["llm"]["cache_path"] = ""
        data["llm"]["generator"] = {**data["llm"]["generator"], "concurrency": 1}
        data["llm"]["verifier"] = {**data["llm"]["verifier"], "concurrency": 3}
        data["runner"] = {"kind": "dask", "workers": 2}
        cfg = Config.model_validate(data)
        assert (cfg.llm.generator.model, cfg.llm.generator.api_base) == (cfg.llm.verifier.model, cfg.llm.verifier.api_base)
        llm_flow(cfg, tasks=4, calls=calls)
        assert server.n_requests == 16
        assert server.max_in_flight_by == {"generator": 1, "verifier": 3}  # each limit reached, never exceeded
        server.hold(5, 16)  # answered only once 5 are in flight: reached when the limits do not hold across workers
        llm_flow(derive(cfg, "runner.llm_limits=process"), tasks=4, calls=calls)
        assert server.max_in_flight_by["generator"] > 1 or server.max_in_flight_by["verifier"] > 3


def test_a_cut_tree_is_rebuilt_by_its_task_retry_and_a_still_cut_one_fails_the_flow_with_a_partial_export(
        small_index_cfg, tmp_path):
    from rubricforge.testing import FakeOpenAI
    from rubricforge.errors import ItemsFailed
    from support.pipeline_fake import CutOneRoot, pipeline_cfg

    cut = CutOneRoot(bad_seeds={0, 1})  # the first build and the task's one retry are both cut
    with FakeOpenAI(responder=cut, keep_requests=False) as server:
        cfg = derive(pipeline_cfg(small_index_cfg, tmp_path, server, "run"), "build.n_trees=2", "runner.retry_delay_s=0",
                     "runner.task_retries=1", "build.invalid_answer_retries=2")
        with pytest.raises(ItemsFailed) as err:
            run_flow(cfg, tmp_path)
        assert "cut the tree (build 2 of 3)" in str(err.value) and cut.invalid == 6
        assert str(err.value).endswith(f"the 1 finished row(s) are exported, marked partial: {tmp_path / 'run' / 'dataset'}")
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["dataset_partial"] is True and manifest["dataset_rows"] == 1
        done = run_flow(cfg, tmp_path)  # the third build samples with seed 2: whole
    assert done.summary.status == "complete" and done.rows == 2 and done.summary.cut_trees == 0
