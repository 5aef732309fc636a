"""The KG job end to end (``build_kg_dataset``: graph, sampling, questions, filters, long-form, export,
viewer): run directory, resume after SIGKILL, refusals, the card's statistics and the viewer's subgraph.

The model answers come from ``tests/data/recordings/kg_linked.jsonl``, recorded from the real
embedded model (Qwen2.5-Coder-0.5B) over this file's linked corpus; the replay backend answers only
from it. Re-record after a prompt or pipeline change (a few minutes on 2 cores)::

    PYTHONPATH=tests .venv/bin/python tests/jobs/test_kg_build.py --record

The corpus: the articles of the three largest connected parts of the default corpus's stated-relation
graph (typed edges read off sentences, :func:`~rubricforge.pipelines.kg.graph.title_links`; about 75
articles), so there are typed hops to sample from and title links among them for the shortcut checks.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from rubricforge.config import Config
from rubricforge.errors import UserError
from support.cli import cli
from support.config import RECORDED_WITH, derive
from support.kill import run_killed
from support.paths import DATA

RECORDING = DATA / "recordings" / "kg_linked.jsonl"
N_PATHS = 6
SETTINGS = ("kg.extract_passages=2", f"kg.n_paths={N_PATHS}", "kg.hops=[2,1,1]", "kg.branch_every=3",
            "kg.sample_attempts=300")
N_PARTS = 3


def write_linked_corpus(path: Path) -> Path:
    """The test corpus (module docstring) as JSONL with title, text, topic and description."""
    import networkx as nx

    from rubricforge.corpora.default_corpus import iter_default_corpus
    from rubricforge.io.rejects import Rejects
    from rubricforge.pipelines.kg.graph import EntityResolver, node_id, title_links

    passages = list(iter_default_corpus(Rejects()))
    resolver = EntityResolver()
    for p in passages:
        resolver.add_article(p)
    stated = nx.Graph([(e.head, e.tail) for e in title_links(passages, resolver) if e.source == "text"])
    parts = sorted(nx.connected_components(stated), key=lambda c: (-len(c), min(c)))[:N_PARTS]
    keep = set().union(*parts)
    with path.open("w", encoding="utf-8") as fh:
        for p in passages:
            if node_id(p.title) in keep:
                fh.write(json.dumps({"id": p.id, "title": p.title, "text": p.text, "topic": p.metadata.get("topic", ""),
                                     "description": p.metadata.get("description", "")}, ensure_ascii=False) + "\n")
    return path


def linked_cfg(root: Path, cache: Path) -> Config:
    from rubricforge.corpora.indexing import build_index

    corpus = write_linked_corpus(root / "corpus.jsonl")
    cfg = derive(Config(), "corpus.source=jsonl", f"corpus.path={corpus}", "corpus.fields.topic=topic",
                 "corpus.fields.description=description", f"tools.index_dir={root / 'index'}",
                 f"llm.cache_path={cache}", f"run_dir={root / 'run'}", *RECORDED_WITH, *SETTINGS)
    build_index(cfg, progress=False)
    return cfg


def record() -> None:
    """Record the real embedded model's answers for the replay tests."""
    import tempfile

    from rubricforge.jobs.kg import build_kg_dataset

    root = Path(tempfile.mkdtemp(prefix="rubricforge-kg-record-"))
    cache = Path(tempfile.gettempdir()) / "rubricforge-kg-record-cache.sqlite"  # kept: a re-recording reuses answers
    cfg = linked_cfg(root, cache)
    RECORDING.parent.mkdir(parents=True, exist_ok=True)
    RECORDING.unlink(missing_ok=True)
    result = build_kg_dataset(derive(cfg, f"llm.record_path={RECORDING}"), progress=True)
    print("\n".join(result.lines()))
    print(f"recorded {RECORDING} ({RECORDING.stat().st_size / 1e3:.1f} kB)")


if __name__ == "__main__" and "--record" in sys.argv:
    record()


# ---------------------------------------------------------------- replayed runs


@pytest.fixture(scope="module")
def kg_cfg(tmp_path_factory) -> Config:
    """The linked corpus's index, every role on the replay backend."""
    root = tmp_path_factory.mktemp("kg")
    cfg = linked_cfg(root, root / "unused-cache.sqlite")
    roles = [f"llm.{r}.backend=replay" for r in ("generator", "verifier", "judge")]
    return derive(cfg, *roles, f"llm.replay_path={RECORDING}", "llm.cache_path=")


@pytest.fixture(scope="module")
def reference(kg_cfg, tmp_path_factory):
    from rubricforge.jobs.kg import build_kg_dataset

    run = tmp_path_factory.mktemp("kg-ref") / "run"
    return build_kg_dataset(derive(kg_cfg, f"run_dir={run}"), progress=False), run


def read_log(run: Path, name: str) -> dict[str, dict]:
    from rubricforge.io.stagelog import StageLog

    return {r["key"]: r for r in StageLog(run / f"{name}.jsonl").records()}  # a torn line is skipped


def test_the_run_writes_graph_checked_subgraphs_logs_and_manifest(kg_cfg, reference):
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.pipelines.kg.constraints import (check_independence, check_necessity, check_reachability,
                                                      check_structure)
    from rubricforge.pipelines.kg.graph import graph_stats, load_graph
    from rubricforge.schema import KGPath

    result, run = reference
    s = result.summary
    docs = len((Path(kg_cfg.corpus.path)).read_text().splitlines())
    assert s.passages >= docs >= 50  # two articles may share a title; long ones are chunked
    assert s.status == "complete" and s.extracted == 2 and s.paths == N_PATHS
    g = load_graph(run / "kg" / "graph.json")
    stats = json.loads((run / "kg" / "graph_stats.json").read_text())
    assert stats == graph_stats(g) == s.graph and stats["edges_by_source"]["link"] > 100
    assert s.stated_edges == stats["edges_by_source"]["text"] > 50
    extractions = read_log(run, "kg_extractions")
    assert len(extractions) == 2 and s.triples == sum(len(r["triples"]) for r in extractions.values())
    assert stats["edges_by_source"].get("llm", 0) <= s.triples  # every llm edge comes from a kept triple
    sampled = json.loads((run / "kg_paths.json").read_text())
    paths = [KGPath.model_validate(p) for p in sampled["paths"]]
    assert [p.shape for p in paths] == ["chain", "chain", "branch"] * 2 and [p.hops for p in paths] == [2, 1, 2] * 2
    with ToolBox.from_config(kg_cfg) as tools:
        search = lambda q, k: [x.passage_id for x in tools.search_snippets(q, k)]  # noqa: E731
        for p in paths:  # the kept subgraphs pass every constraint, re-checked on the saved graph
            assert check_structure(g, p) == check_necessity(g, p) == check_independence(g, p) == []
            assert all(e.source != "link" and e.relation != "mentions" for e in p.edges)  # every hop is stated
            assert check_reachability(p, search, kg_cfg.kg.reach_k) == []
    questions, manifest = read_log(run, "kg_questions"), json.loads((run / "manifest.json").read_text())
    assert set(questions) == {p.id for p in paths} and s.questions == N_PATHS
    filters = read_log(run, "kg_filters")
    for p in paths:  # a question either was dropped with a reason or went through the filters
        q = questions[p.id]
        assert (q["drop"] is not None) != (q["question"] is not None and p.id in filters)
    assert sum(s.drops.values()) + s.retained == s.questions
    assert manifest["job"] == "kg" and manifest["status"] == "complete" and manifest["dataset_rows"] == result.rows
    assert set(manifest["prompt_hashes"]) >= {"kg_extract", "kg_question", "kg_closed_book", "kg_longform"}
    assert manifest["kg_settings"]["n_paths"] == N_PATHS and manifest["ledger"]["total"]["calls"] > 0


def test_dataset_card_and_viewer(reference):
    from datasets import load_from_disk

    result, run = reference
    ds = load_from_disk(str(run / "dataset" / "hf"))["train"]
    assert len(ds) == result.rows == result.summary.retained
    assert {"question", "answer", "answer_aliases", "key_entities", "hops", "difficulty", "subgraph",
            "passage_ids", "race_rubrics"} <= set(ds.column_names)
    stats = json.loads((run / "dataset" / "stats.json").read_text())
    assert stats["counts"]["questions"] == N_PATHS and stats["graph"]["nodes"] == result.summary.graph["nodes"]
    for reason, n in result.summary.drops.items():
        assert stats["drops"][reason] == {"count": n, "rate": round(n / N_PATHS, 4)}
    card = (run / "dataset" / "README.md").read_text()
    assert "## Filters: drop rates" in card and "## Subgraph sampling" in card and "knowledge-graph" in card
    for reason in result.summary.drops:
        assert reason in card
    if not result.rows:
        assert "This dataset is empty" in card
    html = (run / "viewer" / "index.html").read_text()
    assert "function subgraph" in html and all(f'"id":"kgp-000{i}"' in html for i in range(N_PATHS))


def test_a_rerun_reads_everything_back(kg_cfg, reference):
    from rubricforge.jobs.kg import build_kg_dataset

    result, run = reference
    again = build_kg_dataset(derive(kg_cfg, f"run_dir={run}"), progress=False)
    assert again.summary.computed_now == {} and again.summary.ledger.get("calls", 0) == 0
    assert again.rows == result.rows and again.summary.drops == result.summary.drops


def test_sigkill_mid_run_then_the_same_command_resumes_without_redoing_work(kg_cfg, reference, tmp_path):
    from rubricforge.jobs.kg import build_kg_dataset

    result, ref = reference
    run = tmp_path / "run"
    cfg = derive(kg_cfg, f"run_dir={run}")
    # both extractions, then the first subgraph's obfuscation call (its template question needs none): in flight
    proc = run_killed("rubricforge.jobs.kg:build_kg_dataset", cfg, 3, tmp_path)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert len(read_log(run, "kg_extractions")) == 2 and not (run / "kg_questions.jsonl").exists()
    assert json.loads((run / "manifest.json").read_text())["status"] == "running"

    resumed = build_kg_dataset(cfg, progress=False)
    s = resumed.summary
    assert s.status == "complete" and "extractions" not in s.computed_now and s.computed_now["questions"] == N_PATHS
    assert s.ledger["calls"] == result.summary.ledger["calls"] - 2  # only the extractions were not redone
    for name in ("kg_extractions", "kg_questions", "kg_filters", "kg_longform"):
        assert read_log(run, name) == read_log(ref, name)
    assert (run / "kg_examples.jsonl").read_text() == (ref / "kg_examples.jsonl").read_text()
    assert resumed.rows == result.rows and s.drops == result.summary.drops


def test_other_settings_or_a_tree_run_directory_are_refused(kg_cfg, reference, tmp_path):
    from rubricforge.jobs.kg import build_kg_dataset

    _, run = reference
    with pytest.raises(UserError, match="other settings.*n_paths"):
        build_kg_dataset(derive(kg_cfg, f"run_dir={run}", "kg.n_paths=4"), progress=False)
    tree_run = tmp_path / "tree"
    tree_run.mkdir()
    (tree_run / "trees.jsonl").write_text("")
    with pytest.raises(UserError, match="evidence-tree run"):
        build_kg_dataset(derive(kg_cfg, f"run_dir={tree_run}"), progress=False)


def test_a_budget_stop_exports_the_finished_rows_and_a_rerun_finishes(kg_cfg, reference, tmp_path):
    from rubricforge.jobs.kg import build_kg_dataset

    result, _ = reference
    run = tmp_path / "run"
    most = (result.summary.ledger["prompt_tokens"] + result.summary.ledger["completion_tokens"]) * 4 // 5
    stopped = build_kg_dataset(derive(kg_cfg, f"run_dir={run}", f"llm.max_tokens={most}"), progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    assert stopped.summary.status == manifest["status"] and manifest["status"].startswith("stopped: LLM budget reached")
    assert 0 < len(read_log(run, "kg_questions")) < N_PATHS  # some subgraphs were finished before the stop
    # the finished subgraphs' retained rows are exported (the recording retains none: the checks drop its questions)
    assert stopped.rows <= result.rows and manifest["dataset_rows"] == stopped.rows and manifest["dataset_partial"]
    assert len((Path(stopped.out) / "data.jsonl").read_text().splitlines()) == stopped.rows
    assert manifest["invocations"][-1]["status"] == manifest["status"] and manifest["ledger"]["total"]["calls"] > 0
    done = build_kg_dataset(derive(kg_cfg, f"run_dir={run}"), progress=False)
    assert done.summary.status == "complete" and done.rows == result.rows
    assert done.summary.ledger["calls"] < result.summary.ledger["calls"]  # the stopped run's work was kept


def test_a_stage_record_that_no_longer_matches_its_schema_is_named_on_resume(kg_cfg, reference, tmp_path):
    import shutil

    from rubricforge.jobs.kg import build_kg_dataset

    _, ref = reference
    run = tmp_path / "run"
    shutil.copytree(ref, run)
    with (run / "kg_questions.jsonl").open("a") as fh:
        fh.write(json.dumps({"key": "kgp-0000", "question": ["not", "text"], "drop": None}) + "\n")
    with pytest.raises(UserError, match=r"kg_questions.jsonl record 'kgp-0000' does not match the KGQuestion schema"):
        build_kg_dataset(derive(kg_cfg, f"run_dir={run}"), progress=False)
    assert json.loads((run / "manifest.json").read_text())["status"].startswith("failed: UserError: kg_questions.jsonl")


PATH_STAGES = ("kg_question", "kg_obfuscate", "kg_rewrite", "kg_direct_answer", "kg_single_retrieval",
               "kg_plausibility", "kg_longform")


@pytest.mark.parametrize("stages", [("kg_extract", *PATH_STAGES), PATH_STAGES], ids=["every-stage", "subgraph-stages"])
def test_faults_then_a_healthy_rerun_give_the_clean_runs_dataset(kg_cfg, reference, tmp_path, monkeypatch, stages):
    """Half the provider calls of ``stages`` fail (after their retries): no failed call becomes a record, the run
    fails naming how many items failed, and the same command against a healthy provider redoes exactly those."""
    import random

    from rubricforge.errors import ItemsFailed
    from rubricforge.jobs.kg import build_kg_dataset
    from rubricforge.llm.backends.replay import ReplayBackend
    from rubricforge.llm.errors import TransientError

    result, ref = reference
    replay, draw, faults = ReplayBackend.complete, random.Random(5), []

    async def faulty(self, request, role_cfg):
        if request.stage in stages and draw.random() < 0.5:
            faults.append(request.stage)
            raise TransientError(draw.choice(["HTTP 503", "HTTP 429: slow down", "timed out", "empty choices"]))
        return await replay(self, request, role_cfg)

    monkeypatch.setattr(ReplayBackend, "complete", faulty)
    run = tmp_path / "run"
    cfg = derive(kg_cfg, f"run_dir={run}", *(f"llm.{r}.max_retries=1" for r in ("generator", "verifier", "judge")),
                 *(f"llm.{r}.backoff_s=0.001" for r in ("generator", "verifier", "judge")))
    with pytest.raises(ItemsFailed) as err:
        build_kg_dataset(cfg, progress=False)
    failed = [e.split(":")[0] for e in err.value.errors]
    assert faults and failed and "\n" not in str(err.value)
    assert str(err.value).startswith(f"{len(failed)} items failed; re-run the same command to retry them")
    assert json.loads((run / "manifest.json").read_text())["status"].startswith("failed: ItemsFailed")
    before = {name: read_log(run, name) for name in ("kg_extractions", "kg_questions", "kg_filters", "kg_longform")}
    reference_logs = {name: read_log(ref, name) for name in before}
    for name, records in before.items():  # what was logged is finished work: the clean run's records
        assert all(records[key] == reference_logs[name][key] for key in records), name
    for key in failed:  # a failed item misses the record of the stage that failed
        assert any(key in reference_logs[name] and key not in before[name] for name in before), key
    injected = ("HTTP 503", "HTTP 429", "timed out", "empty choices")  # an extraction's error is the model's own
    assert not any(m in (r["error"] or "") for r in before["kg_extractions"].values() for m in injected)

    monkeypatch.setattr(ReplayBackend, "complete", replay)  # the provider recovers
    resumed = build_kg_dataset(cfg, progress=False)
    assert resumed.summary.status == "complete" and resumed.rows == result.rows
    for name, records in before.items():
        after = read_log(run, name)
        assert after == reference_logs[name], name
        redone = set(after) - set(records)
        if "kg_extract" in stages and any(f in reference_logs["kg_extractions"] for f in failed):
            continue  # the graph waited for the failed extractions: every later stage ran now
        assert redone <= set(failed), name  # only the failed items were redone
    assert (run / "kg_examples.jsonl").read_text() == (ref / "kg_examples.jsonl").read_text()


def test_cli_build_source_kg_and_bad_source(kg_cfg, reference, tmp_path):
    import yaml

    _, run = reference
    config = tmp_path / "kg.yaml"
    config.write_text(yaml.safe_dump(derive(kg_cfg, f"run_dir={run}").public_dict()))
    args = ["build", "--config", str(config), "-q"]
    ok = cli(*args, "--source", "kg", timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert f"subgraphs {N_PATHS}" in ok.stderr and f"dataset: {run / 'dataset'}" in ok.stderr
    bad = cli(*args, "--source", "graph", timeout=120)
    assert bad.returncode == 2 and "unknown --source 'graph'" in bad.stderr and "Traceback" not in bad.stderr


def retained_rows_pass_the_checks(run: Path) -> int:
    """Every retained row of ``run``: typed hops only, and the deterministic checks pass on its question (the
    answer's aliases and profile read from the saved graph); returns how many rows there are."""
    from rubricforge.export.kg import read_examples
    from rubricforge.pipelines.kg.checks import question_problem
    from rubricforge.pipelines.kg.graph import load_graph

    g = load_graph(run / "kg" / "graph.json")
    examples = read_examples(run)
    for ex in examples:
        p = ex.path
        aliases = {n: g.nodes[n]["aliases"] for n in p.names}
        profile = " ".join(filter(None, (g.nodes[p.answer].get(k) for k in ("description", "lead"))))
        assert all(e.source != "link" for e in p.edges), ex.id
        assert question_problem(ex.question, p, aliases, profile) is None, (ex.id, ex.question)
    return len(examples)


# ---------------------------------------------------------------- the real model


@pytest.mark.slow
def test_real_embedded_model_end_to_end(tmp_path):
    """One subgraph through every stage with the real embedded model (about 2 minutes on 2 cores); a row it
    retains has typed hops and passes the deterministic checks."""
    from rubricforge.jobs.kg import build_kg_dataset

    cfg = derive(linked_cfg(tmp_path, tmp_path / "cache.sqlite"), "kg.extract_passages=1", "kg.n_paths=1",
                 "kg.hops=[2]", "kg.longform=false")
    result = build_kg_dataset(cfg, progress=False)
    s = result.summary
    assert s.status == "complete" and s.extracted == 1 and s.paths == 1 and s.questions == 1
    assert s.ledger["calls"] >= 1 and s.ledger["completion_tokens"] > 0
    question = read_log(Path(cfg.run_dir), "kg_questions")["kgp-0000"]
    assert question["drop"] or question["question"]
    assert s.retained + sum(s.drops.values()) == 1 and (Path(cfg.run_dir) / "dataset" / "README.md").exists()
    assert retained_rows_pass_the_checks(Path(cfg.run_dir)) == s.retained
