"""The main job end to end (``build_dataset``: the stages, then the export): run directory, resume after SIGKILL, ablation sources, budget
stop, bad input. The model answers come from ``tests/data/recordings/build_two_trees.jsonl``, recorded
from the real embedded model (Qwen2.5-Coder-0.5B) over the session's small index, except two answers
marked ``"note": "hand-written"`` (tree 1's merge and the verifier's KEEP on it, see :func:`record`), so
that a candidate passes the rule checks and the build exports a row; the replay backend answers only
from it. Re-record after a prompt or pipeline change (about 15 minutes on 2 cores)::

    PYTHONPATH=tests .venv/bin/python tests/jobs/test_build.py --record
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
import yaml

from rubricforge.config import Config, load_config
from rubricforge.errors import UserError
from rubricforge.jobs.tree import build_dataset
from rubricforge.pipelines.prompting import prompt_hashes
from support.config import derive
from support.kill import run_killed
from support.replayed import RECORDING, SETTINGS, keys, lines, replay

LOGS = ("trees", "candidates", "verdicts")


def run_build(cfg: Config, progress: bool = False):
    """The main job as ``rubricforge build`` runs it; returns the stages' summary."""
    return build_dataset(cfg, progress=progress).summary


@pytest.fixture(scope="module")
def reference(small_index_cfg, tmp_path_factory):
    """Uninterrupted replayed runs: both trees, and the first tree alone."""
    root = tmp_path_factory.mktemp("reference")
    job = build_dataset(replay(small_index_cfg, root / "full"), progress=False)
    one = run_build(replay(small_index_cfg, root / "one", "build.n_trees=1"), progress=False)
    return {"full": job.summary, "job": job, "one": one, "dir": root / "full"}


def test_run_directory_holds_config_seeds_logs_export_and_manifest(small_index_cfg, reference):
    summary, run = reference["full"], reference["dir"]
    cfg = replay(small_index_cfg, run)
    assert summary.status == "complete" and summary.trees == 2 and summary.computed_now["trees"] == 2
    assert Config.model_validate(yaml.safe_load((run / "config.yaml").read_text())) == cfg
    seeds = json.loads((run / "seeds.json").read_text())["seeds"]
    assert [s["index"] for s in seeds] == [0, 1]
    assert keys(run, "trees") == ["tree-0000", "tree-0001"]
    trees = [json.loads(line)["tree"] for line in lines(run, "trees")]
    assert summary.nodes == sum(len(t["nodes"]) for t in trees)
    for tree, seed in zip(trees, seeds, strict=True):
        assert tree["seed_passage_id"] == seed["passage_id"] and 1 < len(tree["nodes"]) <= 5
        assert max(n["depth"] for n in tree["nodes"].values()) <= 2
    candidates = [json.loads(line)["candidate"] for line in lines(run, "candidates")]
    assert [c["id"] for c in candidates] == ["tree-0000--tree", "tree-0001--tree"]
    assert summary.rule_failures == sum(1 for c in candidates if c["rule_failures"])
    # a candidate failing the rule checks is not verified; every other one is
    assert set(keys(run, "verdicts")) == {c["id"] for c in candidates if not c["rule_failures"]}
    assert summary.verified == len(keys(run, "verdicts")) == sum(summary.decisions.values())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["corpus"]["hash"] == trees[0]["corpus_hash"] != ""
    assert manifest["models"] == {"generator": cfg.llm.generator.model, "verifier": cfg.llm.verifier.model}
    assert manifest["prompt_hashes"] == prompt_hashes() and {"decompose", "extract", "ground", "gate"} <= set(
        manifest["prompt_hashes"])
    assert manifest["ledger"]["total"]["calls"] == summary.ledger["calls"] > 0
    assert {"extract", "decompose", "ground", "merge"} <= set(manifest["ledger"]["by_stage"])
    assert manifest["counts"]["trees"] == 2 and manifest["versions"]["rubricforge"]
    assert (run / "dataset").is_dir() and Path(reference["job"].viewer).is_file()
    assert reference["job"].out == str(run / "dataset") == manifest["dataset_dir"]
    assert reference["job"].rows == summary.retained == manifest["dataset_rows"]
    assert summary.decisions.get("KEEP", 0) >= 1 and reference["job"].rows >= 1  # the recording's KEEP is exported


def test_the_recorded_keep_is_the_verdict_on_the_hand_written_candidate(small_index_cfg, reference):
    """The one KEEP in the recording answers the verifier's request on tree 1's hand-written candidate (the
    key :func:`record` replaces), and it is what the build exported."""
    key = handwritten_verify_key(replay(small_index_cfg, reference["dir"]), reference["dir"])
    keeps = [e for e in map(json.loads, RECORDING.read_text(encoding="utf-8").splitlines())
             if e["stage"] == "verify" and json.loads(e["text"])["decision"] == "KEEP"]
    assert [e["key"] for e in keeps] == [key] and json.loads(keeps[0]["text"]) == HANDWRITTEN_KEEP
    verdicts = {json.loads(x)["key"]: json.loads(x)["verification"] for x in lines(reference["dir"], "verdicts")}
    assert verdicts["tree-0001--tree"]["decision"] == "KEEP"


def test_the_repairs_are_counted_by_category_in_summary_manifest_card_and_viewer(reference):
    """The hand-written candidate's R1 ("States the specific fact reported in the selected evidence.") is rewritten
    from its evidence: one grounding repair, in the merge trace, the summary, the manifest, the card and the viewer."""
    run, summary = reference["dir"], reference["full"]
    candidate = next(json.loads(x)["candidate"] for x in lines(run, "candidates") if json.loads(x)["key"] == "tree-0001--tree")
    [repair] = candidate["repairs"]
    assert (repair["target"], repair["action"], repair["category"]) == ("R1", "rewritten", "Evidence sufficiency / grounding")
    assert candidate["rubrics"][0]["description"] == repair["after"] and repair["after"].startswith("States that ")
    assert candidate["merge_trace"][-1] == {"step": "repair", **repair}
    grounding = {"rewritten": 1, "removed": 0}
    assert summary.repairs["Evidence sufficiency / grounding"] == grounding and len(summary.repairs) == 6
    assert "Evidence sufficiency / grounding 1 rewritten / 0 removed" in summary.lines()[-1]
    assert json.loads((run / "manifest.json").read_text())["counts"]["repairs"] == summary.repairs
    card = (run / "dataset" / "README.md").read_text()
    assert "### Deterministic repairs" in card and "| Evidence sufficiency / grounding | 1 | 0 | 18.2% |" in card
    assert repair["reason"] in Path(reference["job"].viewer).read_text()


def test_a_finished_run_rerun_recomputes_nothing(small_index_cfg, reference, tmp_path):
    run = tmp_path / "run"
    run_build(replay(small_index_cfg, run), progress=False)
    before = {name: lines(run, name) for name in LOGS}
    again = run_build(replay(small_index_cfg, run), progress=False)
    assert again.computed_now == {} and again.ledger["calls"] == 0
    assert {name: lines(run, name) for name in LOGS} == before
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["invocations"]) == 2
    assert manifest["ledger"]["total"]["calls"] == reference["full"].ledger["calls"]  # summed over both


def test_sigkill_mid_run_then_the_same_command_resumes_without_redoing_work(small_index_cfg, reference, tmp_path):
    run = tmp_path / "run"
    cfg = replay(small_index_cfg, run)
    first_tree_calls = int(reference["one"].ledger["calls"])  # tree 0 through all its stages
    kill_after = first_tree_calls + 3  # three calls into tree 1's stage 1
    proc = run_killed("rubricforge.jobs.tree:build_dataset", cfg, kill_after, tmp_path)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert keys(run, "trees") == ["tree-0000"]  # tree 1 was in flight: nothing of it was written
    finished = {name: lines(run, name) for name in LOGS}
    assert json.loads((run / "manifest.json").read_text())["status"] == "running"

    resumed = run_build(cfg, progress=False)
    assert resumed.status == "complete"
    assert resumed.computed_now.get("trees") == 1 and resumed.computed_now.get("candidates") == 1
    assert resumed.computed_now.get("verdicts", 0) == len(keys(reference["dir"], "verdicts")) - len(finished["verdicts"])
    # only tree 1 was computed: exactly the calls of the full run minus those of tree 0
    assert resumed.ledger["calls"] == reference["full"].ledger["calls"] - first_tree_calls
    for name in LOGS:
        now = lines(run, name)
        assert now[: len(finished[name])] == finished[name]  # finished records untouched
        assert len(set(keys(run, name))) == len(now)  # no duplicates
        assert keys(run, name) == keys(reference["dir"], name)
    strip = lambda ls: [json.loads(x) for x in ls]  # noqa: E731
    assert strip(lines(run, "trees")) == strip(lines(reference["dir"], "trees"))  # same trees as an uninterrupted run


def test_ablation_sources_reuse_the_trees_and_questions(small_index_cfg, reference, tmp_path):
    run = tmp_path / "run"
    run_build(replay(small_index_cfg, run), progress=False)
    for source in ("closed-book", "search"):
        summary = run_build(replay(small_index_cfg, run, f"build.rubric_source={source}"), progress=False)
        assert summary.computed_now.get("trees", 0) == 0 and summary.candidates == 2
    candidates = {json.loads(x)["key"]: json.loads(x)["candidate"] for x in lines(run, "candidates")}
    for tree in ("tree-0000", "tree-0001"):
        base = candidates[f"{tree}--tree"]
        for source in ("closed-book", "search"):
            c = candidates[f"{tree}--{source}"]
            assert c["rubric_source"] == source
            if base["question"]:
                assert c["question"] == base["question"]
            else:
                assert "no question" in c["generation_error"]
        if base["question"]:
            trace = candidates[f"{tree}--search"]["selection_trace"]
            assert trace and candidates[f"{tree}--search"]["selected_leaf_ids"]


def test_budget_exhaustion_stops_cleanly_and_a_rerun_finishes(small_index_cfg, reference, tmp_path):
    run = tmp_path / "run"
    tokens_first_tree = reference["one"].ledger["prompt_tokens"] + reference["one"].ledger["completion_tokens"]
    stopped = run_build(replay(small_index_cfg, run, f"llm.max_tokens={int(tokens_first_tree) + 50}"), progress=False)
    assert stopped.status.startswith("stopped:") and "budget" in stopped.status.lower()
    assert keys(run, "trees") == ["tree-0000"]
    assert json.loads((run / "manifest.json").read_text())["status"] == stopped.status
    done = run_build(replay(small_index_cfg, run), progress=False)
    assert done.status == "complete" and done.computed_now["trees"] == 1
    assert keys(run, "trees") == ["tree-0000", "tree-0001"]


def test_a_model_that_returns_garbage_gets_a_clear_message(small_index_cfg, tmp_path):
    """A real litellm backend talking to a model server that answers every request with prose."""
    from rubricforge.testing import FakeOpenAI, Reply
    from support.llm_fakes import litellm_llm_config

    run = tmp_path / "run"
    with FakeOpenAI([Reply("Sure! Here is a great answer: the topic is very interesting.")]) as server:
        data = derive(small_index_cfg, *SETTINGS, f"run_dir={run}").model_dump(mode="json")
        data["llm"].update(litellm_llm_config(tmp_path, server, structured_retries=1))
        with pytest.raises(UserError, match=r"returned no valid JSON in \d+ calls") as err:
            run_build(Config.model_validate(data), progress=False)
    assert "--set llm.generator.model=" in str(err.value) and "no JSON object" in str(err.value)
    assert lines(run, "trees") == []  # nothing a garbage model produced is kept
    assert json.loads((run / "manifest.json").read_text())["status"].startswith("failed")
    assert len(server.requests) < 10  # it stopped at the first tree, not after every seed


def test_resuming_with_other_tree_settings_is_refused(small_index_cfg, tmp_path):
    run = tmp_path / "run"
    run_build(replay(small_index_cfg, run, "build.n_trees=1"), progress=False)
    with pytest.raises(UserError, match="max_nodes: 5 -> 6"):
        run_build(replay(small_index_cfg, run, "build.n_trees=1", "build.max_nodes=6"), progress=False)


def test_empty_corpus_and_missing_fields_are_user_errors(small_index_cfg, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    cfg = derive(small_index_cfg, "corpus.source=jsonl", f"corpus.path={empty}", "corpus.fields={}",
                 f"tools.index_dir={tmp_path / 'idx-empty'}", f"run_dir={tmp_path / 'run1'}")
    with pytest.raises(UserError, match="no usable records"):
        run_build(cfg, progress=False)
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({"id": "a", "body": "Bees pollinate crops."}) + "\n")
    cfg = derive(cfg, f"corpus.path={wrong}", f"tools.index_dir={tmp_path / 'idx-wrong'}", f"run_dir={tmp_path / 'run2'}")
    with pytest.raises(UserError, match="field 'text'"):
        run_build(cfg, progress=False)


@pytest.mark.parametrize("override, where", [("build.max_depth=0", "build.max_depth"),
                                             ("build.branching=[6,0,3]", "build.branching"),
                                             ("build.branching=[]", "build.branching"),
                                             ("build.max_nodes=1", "build.max_nodes"),
                                             ("build.n_trees=0", "build.n_trees")])
def test_impossible_build_settings_are_rejected_by_the_config(override, where):
    with pytest.raises(UserError, match=where):
        load_config(None, [override], environ={})


@pytest.mark.slow
def test_real_embedded_model_end_to_end_and_the_cache_answers_a_repeat(small_index_cfg, tmp_path):
    cfg = derive(small_index_cfg, "build.n_trees=1", "build.target_rows=0", "build.max_nodes=4",
                 "build.passages_per_node=1", f"run_dir={tmp_path / 'run'}", f"llm.cache_path={tmp_path / 'cache.sqlite'}")
    summary = run_build(cfg, progress=False)
    assert summary.status == "complete" and summary.trees == 1 and summary.candidates == 1
    [tree] = [json.loads(line)["tree"] for line in lines(tmp_path / "run", "trees")]
    assert len(tree["nodes"]) <= 4
    assert len(tree["nodes"]) + len(tree["dropped"]) >= 2  # the root proposed children: kept, or dropped with reasons
    for node in tree["nodes"].values():
        assert node["query"] and len(node["passage_ids"]) == 1 and node["depth"] <= 3
        assert all(s["passage_id"] == node["passage_ids"][0] for s in node["statements"])
    assert summary.ledger["requests"] > 0 and summary.ledger["failures"] < summary.ledger["calls"]
    # the same work in a fresh run directory: every call is answered by the LLM cache
    again = run_build(derive(cfg, f"run_dir={tmp_path / 'again'}"), progress=False)
    assert again.ledger["cache_hits"] == again.ledger["calls"] == summary.ledger["calls"]
    assert again.ledger["requests"] == 0
    assert lines(tmp_path / "again", "trees") == lines(tmp_path / "run", "trees")


@pytest.mark.slow
def test_the_default_pipeline_with_the_default_model_retains_a_grounded_row(small_index_cfg, tmp_path):
    """The default build settings and model over the small index, from an empty cache, for a seed the prompts were
    not tuned on (1; tuned on 0): trees are built until the wanted row is retained (build.target_rows=1, at most 8
    trees; the ten-seed table in the README needed 1–5 on the default corpus), and that row's question is a question
    every clause of which a rubric checks, and its factual evidence verbatim."""
    small = small_index_cfg
    cfg = derive(Config(), "corpus.source=jsonl", f"corpus.path={small.corpus.path}", "corpus.fields.topic=topic",
                 f"tools.index_dir={small.tools.index_dir}", f"embedding.backend={small.embedding.backend}",
                 "build.seed=1", "build.max_trees=8",
                 f"run_dir={tmp_path / 'run'}", f"llm.cache_path={tmp_path / 'cache.sqlite'}")
    job = build_dataset(cfg, progress=False)
    assert job.summary.status == "complete" and job.rows >= 1, job.summary.to_dict()
    assert job.summary.retained >= 1 and job.summary.trees <= 8
    first_row = json.loads((Path(job.out) / "data.jsonl").read_text().splitlines()[0])
    [tree] = [json.loads(line)["tree"] for line in lines(tmp_path / "run", "trees")
              if json.loads(line)["key"] == first_row["id"].split("--")[0]]
    held = [p for n in tree["nodes"].values() for p in n["passage_ids"]]
    assert len(held) == len(set(held)) > 1  # each node brought its own passage
    [row] = [json.loads(line) for line in (Path(job.out) / "data.jsonl").read_text().splitlines()][:1]
    assert row["question"].strip().endswith("?")
    from rubricforge.corpora.embedding import Embedder
    from rubricforge.pipelines.tree.rules import coverage_failures
    from rubricforge.schema import Criterion

    rubrics = [Criterion.model_validate(r) for r in row["rubrics"]]
    assert coverage_failures(row["question"], rubrics, Embedder().embed_queries) == []
    statements = {s["text"] for n in tree["nodes"].values() for s in n["statements"]}
    factual = [r for r in row["rubrics"] if r["type"] == "factual"]
    assert factual and all(e in statements for r in factual for e in r["evidence"])
    # no duplicate, unsupported, off-topic or copied rubric by the deterministic repairs (issue 34)
    from rubricforge.pipelines.tree.repairs import pending_repairs
    from rubricforge.schema import Candidate, EvidenceTree

    kept = Candidate(id=row["id"], tree_id=tree["id"], question=row["question"], rubrics=rubrics,
                     selected_leaf_ids=row["leaf_ids"])
    assert pending_repairs(kept, EvidenceTree.model_validate(tree), Embedder().embed_queries) == [], row


# ---------------------------------------------------------------- re-recording


def handwritten_merge(tree) -> dict:
    """A Fig. 11 answer that passes the rule checks (the 0.5B model's own never does), so the real
    verifier gets a candidate to audit. Marked ``"note": "hand-written"`` in the recording. Its R1 states no fact
    of its evidence, so the deterministic repairs rewrite it from its evidence statement before the verifier sees
    it (the recorded KEEP is keyed on the repaired candidate)."""
    from rubricforge.pipelines.tree.serialize import leaf_nodes

    leaves = [leaf for leaf in leaf_nodes(tree) if leaf.statements][:2]
    ids = [leaf.id for leaf in leaves]
    logical = ["Explains how the selected facets relate to each other instead of listing them separately.",
               "Attributes every factual claim to a cited source passage.",
               "Distinguishes well-supported claims from uncertain or disputed ones.",
               "Ends with a conclusion that weighs the strength of the available evidence."]
    rubrics = [{"id": "R1", "type": "factual", "description": "States the specific fact reported in the selected evidence.",
                "weight": 0.9, "source_leaf_ids": ids[:1], "evidence": [leaves[0].statements[0].text]}]
    rubrics += [{"id": f"R{i}", "type": "logical", "description": d, "weight": round(0.8 - 0.1 * i, 2),
                 "source_leaf_ids": ids, "evidence": []} for i, d in enumerate(logical, start=2)]
    return {"question": f"What does the available evidence establish about {tree.seed_title}, and how do its facets connect?",
            "selected_leaf_ids": ids, "selection_trace": f"{', '.join(ids)}: the leaves with evidence",
            "merge_trace": [{"inputs": ids, "output": "final question", "rationale": "one topic"}], "rubrics": rubrics}


# The 0.5B verifier drops every candidate, so the recorded verdict on tree 1's hand-written candidate is
# replaced by this KEEP: the replayed build then exports a row, as a real one with a stronger verifier does.
HANDWRITTEN_KEEP = {"decision": "KEEP", "error_tags": [], "major_issues": [],
                    "justification": "The question asks how the selected facets connect, a synthesis no single passage "
                                     "answers; the factual rubric is grounded in the selected evidence and the logical "
                                     "rubrics check synthesis, attribution, uncertainty and the conclusion."}


def record() -> None:
    """Record the real embedded model's answers for the replay tests (tree, closed-book, search).

    A first run fills the LLM cache; tree 1's merge answer is then replaced in the cache by
    :func:`handwritten_merge`; a second run in a fresh directory records every answer it uses; the
    verifier's answer on that candidate is replaced by :data:`HANDWRITTEN_KEEP`.
    """
    import tempfile

    from support.config import RECORDED_WITH, write_small_corpus
    from rubricforge.corpora.indexing import build_index
    from rubricforge.llm import LLMClient
    from rubricforge.llm.cache import ResponseCache
    from rubricforge.llm.request import Completion
    from rubricforge.pipelines.tree.serialize import serialize_tree
    from rubricforge.pipelines.tree.synthesis import MergeOutput, merge_messages
    from rubricforge.schema import EvidenceTree

    root = Path(tempfile.mkdtemp(prefix="rubricforge-record-"))
    corpus = write_small_corpus(root / "corpus.jsonl")
    cache = Path(tempfile.gettempdir()) / "rubricforge-record-cache.sqlite"  # kept: a re-recording reuses answers
    base = derive(Config(), "corpus.source=jsonl", f"corpus.path={corpus}", "corpus.fields.topic=topic",
                  f"tools.index_dir={root / 'index'}", f"llm.cache_path={cache}", *RECORDED_WITH, *SETTINGS)
    build_index(base, progress=True)
    print("first run", run_build(derive(base, f"run_dir={root / 'first'}"), progress=True).to_dict())
    tree = EvidenceTree.model_validate(json.loads(lines(root / "first", "trees")[1])["tree"])
    b = base.build
    text = serialize_tree(tree, max_leaves=b.max_leaves, statements_per_leaf=b.statements_per_leaf,
                          max_chars=b.max_chars).text
    request = LLMClient(base.llm).request("generator", merge_messages(text), output=MergeOutput, stage="merge")
    ResponseCache(cache).put(request, Completion(text=json.dumps(handwritten_merge(tree))))
    RECORDING.unlink(missing_ok=True)
    for source in ("tree", "closed-book", "search"):
        cfg = derive(base, f"run_dir={root / 'run'}", f"llm.record_path={RECORDING}", f"build.rubric_source={source}")
        print(source, run_build(cfg, progress=True).to_dict())
    verify_key = handwritten_verify_key(base, root / "run")
    entries = [json.loads(line) for line in RECORDING.read_text().splitlines()]
    for e in entries:
        if e["key"] == request.key():
            e["note"] = "hand-written (tests/jobs/test_build.py handwritten_merge)"
        if e["key"] == verify_key:
            e["text"], e["note"] = json.dumps(HANDWRITTEN_KEEP), "hand-written (tests/jobs/test_build.py HANDWRITTEN_KEEP)"
    RECORDING.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries))
    print(f"recorded {RECORDING} ({RECORDING.stat().st_size / 1e6:.2f} MB)")


def handwritten_verify_key(cfg: Config, run_dir: Path) -> str:
    """The recording key of the verifier's request on tree 1's (hand-written) tree candidate in ``run_dir``."""
    from rubricforge.llm import LLMClient
    from rubricforge.pipelines.tree.verification import VerifyOutput, audit_sample, verify_messages
    from rubricforge.schema import Candidate, EvidenceTree

    candidate = Candidate.model_validate(next(json.loads(x)["candidate"] for x in lines(run_dir, "candidates")
                                              if json.loads(x)["key"] == "tree-0001--tree"))
    tree = EvidenceTree.model_validate(json.loads(lines(run_dir, "trees")[1])["tree"])
    messages = verify_messages(audit_sample(candidate, tree, cfg))
    return LLMClient(cfg.llm).request("verifier", messages, output=VerifyOutput, stage="verify").key()


if __name__ == "__main__" and "--record" in sys.argv:
    record()


def test_a_rerun_reads_each_stage_log_once_to_resume_finish_and_export(small_index_cfg, reference,
                                                                                       tmp_path, monkeypatch):
    import shutil

    import rubricforge.io.stagelog as stagelog

    run = tmp_path / "again"
    shutil.copytree(reference["dir"], run)
    reads: dict[str, int] = {}
    lines_of = stagelog._lines

    def counted(path):
        reads[path.name] = reads.get(path.name, 0) + 1
        return lines_of(path)

    monkeypatch.setattr(stagelog, "_lines", counted)
    assert run_build(replay(small_index_cfg, run)).computed_now == {}
    assert {name: reads.get(f"{name}.jsonl") for name in LOGS} == {name: 1 for name in LOGS}
