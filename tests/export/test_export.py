"""Dataset export: round trip across formats, the DR Tulu and TRL views, provenance, determinism, the
empty dataset, the statistics and card numbers for a hand-built run, and the Hub token handling."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from rubricforge.agent.prompt import agent_system_prompt, prompt_hash
from rubricforge.errors import UserError
from rubricforge.export import export_dataset
from rubricforge.export.run import load_run
from rubricforge.export.stats import OTHER, primary_revision_reason
from rubricforge.export.views import features
from rubricforge.io.stagelog import StageLog
from rubricforge.schema import Verification
from support import drtulu
from support.fixtures_run import LEDGER, MODELS, make_run


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _disk(path: Path) -> list[dict]:
    from datasets import load_from_disk

    return load_from_disk(str(path))["train"].to_list()


@pytest.fixture
def exported(tmp_path):
    run_dir = make_run(tmp_path)
    result = export_dataset(run_dir)
    return run_dir, run_dir / "dataset", result


def test_formats_agree_and_rows_are_sorted(exported):
    _, out, result = exported
    assert result["n_examples"] == 2 and result["path"] == str(out)
    rows = _disk(out / "hf")
    assert [r["id"] for r in rows] == ["tree-0000--tree", "tree-0001--tree"]
    assert pq.read_table(out / "data.parquet").to_pylist() == rows
    assert _jsonl(out / "data.jsonl") == rows
    assert _disk(out / "drtulu") == _jsonl(out / "drtulu.jsonl") == pq.read_table(out / "drtulu.parquet").to_pylist()
    assert _disk(out / "trl") == pq.read_table(out / "trl.parquet").to_pylist()


def test_rows_carry_final_rubrics_and_provenance(exported):
    _, out, _ = exported
    keep, revise = _jsonl(out / "data.jsonl")
    assert keep["decision"] == "KEEP" and revise["decision"] == "REVISE"
    assert revise["question"] == "What role did Roman roads play in trade?"  # the verifier's revision
    assert [r["description"].startswith("Revised: ") for r in revise["rubrics"]] == [True] * 5
    assert set(keep["rubrics"][0]) == {"id", "type", "description", "weight", "title", "source_leaf_ids", "evidence",
                                       "passage_ids"}
    assert [r["type"] for r in keep["rubrics"]].count("factual") == 4
    assert keep["tree_id"] == "tree-0000" and keep["leaf_ids"] == ["n2", "n4", "n5"]
    assert keep["corpus_hash"] == "c0ffee" and keep["topic"] == "Biology" and keep["rubric_source"] == "tree"
    assert json.loads(keep["models"]) == MODELS
    assert json.loads(keep["prompt_hashes"]) == {"merge": "aaaa11112222", "verify": "bbbb33334444"}
    cited = {p for r in keep["rubrics"] for p in r["passage_ids"]}
    assert cited and cited <= set(keep["passage_ids"])
    assert {"tree-0000-n2-p2", "tree-0000-n5-p1"} <= set(keep["passage_ids"])  # every passage of the selected leaves


def test_drtulu_view_matches_dr_tulu_rl_rows(exported):
    _, out, _ = exported
    rows = _jsonl(out / "drtulu.jsonl")
    main = _jsonl(out / "data.jsonl")
    for row, ex in zip(rows, main, strict=True):
        assert set(row) == {"id", "source", "question_type", "messages", "ground_truth", "dataset"}
        assert row["messages"] == [{"role": "user", "content": ex["question"]}]
        assert isinstance(row["ground_truth"], str)
        gt = json.loads(row["ground_truth"])
        assert set(gt) == {"query", "rubrics"} and gt["query"] == ex["question"]
        assert [set(r) for r in gt["rubrics"]] == [{"description", "weight", "title"}] * len(ex["rubrics"])
        assert [r["weight"] for r in gt["rubrics"]] == [r["weight"] for r in ex["rubrics"]]
        assert row["dataset"] == "general_rubric" and row["question_type"] == "long_form"
        assert row["source"] == "rubricforge_demo"
    assert json.loads(rows[0]["ground_truth"])["rubrics"][0]["title"] == "R1 factual"
    assert rows and all(drtulu.routes(r) and drtulu.label_ok(r) for r in rows) and drtulu.rubric_buffer_ok(rows)


def test_trl_view_has_the_agent_system_prompt(exported):
    _, out, _ = exported
    rows = _disk(out / "trl")
    for row in rows:
        assert row["prompt"] == [{"role": "system", "content": agent_system_prompt()},
                                 {"role": "user", "content": row["question"]}]
        assert row["system_prompt_hash"] == prompt_hash()
        assert row["rubrics"] and row["tree_id"]  # reward functions get the rubrics with the prompt


def test_reexport_is_identical_and_replaces_the_folder(exported):
    run_dir, out, _ = exported
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    (out / "stale.txt").write_text("from an older export")
    (run_dir / ".dataset.tmp-999").mkdir()  # left by a killed export
    export_dataset(run_dir)
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before
    assert not list(run_dir.glob(".dataset.*"))


def test_examples_jsonl_is_used_when_the_pipeline_wrote_it(tmp_path):
    run_dir = make_run(tmp_path)
    keep = load_run(run_dir).examples[0]
    StageLog(run_dir / "examples.jsonl").append(keep.id, {"example": keep.model_dump(mode="json")})
    result = export_dataset(run_dir)
    assert result["n_examples"] == 1
    assert [r["id"] for r in _jsonl(run_dir / "dataset" / "data.jsonl")] == ["tree-0000--tree"]


def test_empty_dataset_has_the_schema_and_the_card_says_why(tmp_path):
    run_dir = make_run(tmp_path, only=[2, 3])  # a DROP and a rule failure
    result = export_dataset(run_dir)
    out = run_dir / "dataset"
    assert result["n_examples"] == 0
    from datasets import load_from_disk

    for config, folder in (("default", "hf"), ("drtulu", "drtulu"), ("trl", "trl")):
        ds = load_from_disk(str(out / folder))["train"]
        assert ds.num_rows == 0 and ds.features == features()[config]
    assert pq.read_table(out / "data.parquet").num_rows == 0
    assert pq.read_table(out / "data.parquet").column_names == list(features()["default"])
    assert (out / "data.jsonl").read_text() == ""
    card = (out / "README.md").read_text()
    assert "**This dataset is empty.**" in card
    assert "none of the 2 generated examples was retained: 1 failed the rule checks; 1 were dropped by the verifier" in card
    no_trees = export_dataset(make_run(tmp_path, only=[], name="no-trees"))
    assert no_trees["n_examples"] == 0
    assert no_trees["stats"]["empty_reason"] .startswith("no evidence tree was built")


def test_stats_match_the_hand_built_run(exported):
    _, out, result = exported
    stats = json.loads((out / "stats.json").read_text())
    assert stats == json.loads(json.dumps(result["stats"]))
    c = stats["counts"]
    assert (c["trees"], c["nodes"], c["leaves"], c["dropped_children"]) == (5, 17, 12, 1)
    assert (c["generated"], c["rule_failed"], c["verified"], c["retained"], c["revise_rule_failed"]) == (5, 1, 4, 2, 1)
    assert c["decisions"] == {"KEEP": 1, "REVISE": 2, "DROP": 1, "UNPARSEABLE": 0}
    assert stats["rates"] == {"retained": 0.4, "rule_failure": 0.2, "keep": 0.25, "revision": 0.5, "drop": 0.25,
                              "unparseable": 0.0}
    assert stats["trees"] == {"depth_configured": 3, "depth_max": 2, "nodes_per_tree": 3.4, "leaves_per_tree": 2.4}
    ex = stats["retained_examples"]
    assert ex == {"n": 2, "selected_leaves_per_example": 3.0, "passages_per_selected_leaf": round(13 / 6, 3),
                  "criteria_per_example": 5.5, "factual_share": round(7 / 11, 4), "logical_share": round(4 / 11, 4),
                  "exact_span_evidence_share": 0.0}  # the hand-built statements are written ones, without offsets
    assert stats["generated_candidates"]["n"] == 5 and stats["generated_candidates"]["criteria_per_example"] == 4.4
    rr = stats["revision_reasons"]
    assert rr["n_revised"] == 2
    assert rr["counts"]["Question–rubric mismatch"] == 1 and rr["counts"]["Negative-weight rubric removal"] == 1
    assert sum(rr["counts"].values()) == 2
    cost = stats["cost"]
    assert cost["total"]["calls"] == LEDGER["total"]["calls"]
    assert cost["per_retained_example"] == {"calls": 17.5, "tokens": 14500.0, "cost_usd": 0.01}
    assert cost["by_stage_per_retained_example"]["verify"] == {"calls": 2.0, "tokens": 2950.0, "cost_usd": 0.001}
    assert stats["models"] == {"tree_generation": "gen-model-0.5b", "quality_audit": "audit-model-7b"}
    assert stats["empty_reason"] is None


def test_card_shows_the_numbers_beside_the_paper(exported):
    _, out, _ = exported
    card = (out / "README.md").read_text()
    head = yaml.safe_load(card.split("---\n")[1])
    assert head["license"] == "cc-by-sa-4.0"
    # DR Tulu's rows are the default config (what `load_dataset(repo)` and DR Tulu's dataset mixer load)
    assert [c["config_name"] for c in head["configs"]] == ["default", "rubricforge", "trl"]
    assert head["configs"][0]["data_files"] == [{"split": "train", "path": "drtulu.parquet"}]
    assert head["configs"][1]["data_files"] == [{"split": "train", "path": "data.parquet"}]
    for row in ["| Generated examples | 5 |  | 9,838 |",
                "| Final retained (KEEP + REVISE) | 2 (40.0%) |  | 9,064 (92.1%) |",
                "| Nodes per tree | 3.4 |  | 54.5 |",
                "| Leaves per tree | 2.4 |  | 38.7 |",
                "| Selected leaves per example | 3.0 | 2.0 | 5.0 |",
                "| Evidence passages per selected leaf | 2.2 | 1.9 | 2.9 |",
                "| Rubric criteria per example | 5.5 | 4.4 | 7.0 |",
                "| Factual / Logical | 63.6% / 36.4% | 63.6% / 36.4% | 58.4% / 41.6% |",
                "| Revision rate (REVISE / verified) | 50.0% |  | 91.5% |",
                "| Drop rate (DROP / verified) | 25.0% |  | 7.9% |",
                "| Rule-check failures (/ generated, not verified) | 20.0% |  |  |",
                "| Tree generation model | `gen-model-0.5b` |  | DeepSeek-V3.2 |",
                "| Quality audit model | `audit-model-7b` |  | GPT-5.1 |",
                "| Question–rubric mismatch | 1 | 50.0% | 56.4% |",
                "| Negative-weight rubric removal | 1 | 50.0% | 8.2% |",
                "| verify | 4 | 4,000 | 1,900 | $0.0020 | 0 | 0 | 2.00 | 2,950 | $0.0010 |",
                "| **total** | 35 | 22,000 | 7,000 | $0.0200 | 4 | 1 | 17.50 | 14,500 | $0.0100 |"]:
        assert row in card, row
    assert "| `models` | string (JSON) |" in card


@pytest.mark.parametrize(("tags", "issues", "category"), [
    (["question_rubric_mismatch"], [], "Question–rubric mismatch"),
    (["Entity mismatch"], [], "Entity / domain / time mismatch"),
    (["style"], ["The question overreaches the merged leaves"], "Question scope / merge overreach"),
    (["duplicate-rubrics"], [], "Rubric design / granularity"),
    (["invalid weights"], [], "Negative-weight rubric removal"),
    ([], ["R3 makes an unsupported claim"], "Evidence sufficiency / grounding"),
    (["style"], ["too long"], OTHER),
    ([], [], OTHER),
])
def test_primary_revision_reason(tags, issues, category):
    v = Verification(candidate_id="c", decision="REVISE", error_tags=tags, major_issues=issues)
    assert primary_revision_reason(v) == category


def test_unreadable_records_are_skipped_and_counted(tmp_path):
    run_dir = make_run(tmp_path)
    StageLog(run_dir / "candidates.jsonl").append("broken", {"candidate": {"id": "broken"}})
    result = export_dataset(run_dir)
    assert result["n_examples"] == 2
    assert result["stats"]["unreadable_records"] == ["candidates.jsonl broken: 2 schema error(s)"]
    assert "could not be read and were skipped" in (run_dir / "dataset" / "README.md").read_text()


def test_not_a_run_directory(tmp_path):
    with pytest.raises(UserError, match="is not a run directory"):
        export_dataset(tmp_path / "nothing-here")


# ---------------------------------------------------------------- Hub


def test_push_without_token_fails_fast_naming_hf_token(tmp_path, monkeypatch):
    run_dir = make_run(tmp_path)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(UserError, match="HF_TOKEN"):
        export_dataset(run_dir, push_to_hub="org/name")
    assert not (run_dir / "dataset").exists()
    with pytest.raises(UserError, match="not a Hub dataset id"):
        export_dataset(run_dir, push_to_hub="org/name/extra")


def test_push_uses_the_environment_token_and_never_writes_it(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub

    token = "hf_test_token_do_not_write_4242"
    monkeypatch.setenv("HF_TOKEN", token)
    pushed, uploaded = [], []

    def fake_push(self, repo_id, config_name="default", token=None, **kwargs):
        pushed.append((repo_id, config_name, token, self["train"].num_rows))
        columns[config_name] = self["train"].column_names

    columns = {}

    def fake_upload(self, *, path_or_fileobj, path_in_repo, repo_id, repo_type, **kwargs):
        uploaded.append((self.token, path_in_repo, repo_id, repo_type, path_or_fileobj.decode()))

    monkeypatch.setattr(datasets.DatasetDict, "push_to_hub", fake_push)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_file", fake_upload)
    run_dir = make_run(tmp_path)
    result = export_dataset(run_dir, push_to_hub="org/rubrics")
    assert result["pushed_to"] == "org/rubrics"
    assert pushed == [("org/rubrics", name, token, 2) for name in ("rubricforge", "default", "trl")]
    assert {"messages", "ground_truth", "dataset"} <= set(columns["default"])  # DR Tulu's rows
    (api_token, path, repo, kind, card), = uploaded
    assert (api_token, path, repo, kind) == (token, "README.md", "org/rubrics", "dataset")
    head = yaml.safe_load(card.split("---\n")[1])
    assert [c["data_files"][0]["path"] for c in head["configs"]] == ["data/train-*", "rubricforge/train-*",
                                                                     "trl/train-*"]
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    assert MetadataConfigs.from_dataset_card_data(DatasetCardData(**head)).get_default_config_name() == "default"
    assert 'load_dataset("org/rubrics", "rubricforge")' in card
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_exact_span_evidence_is_a_verbatim_statement_with_offsets_of_a_source_leaf():
    from support.trees import tiny_tree

    from rubricforge.export.stats import exact_span_evidence
    from rubricforge.schema import Criterion

    tree = tiny_tree()
    spans = tree.model_copy(deep=True)
    for s in spans.nodes["n4"].statements:
        s.start, s.end = 0, len(s.text)
    text = tree.nodes["n4"].statements[0].text

    def rubric(evidence, leaves=("n4",)):
        return Criterion(id="R1", type="factual", description="d", weight=1, source_leaf_ids=list(leaves), evidence=evidence)

    assert exact_span_evidence(rubric([text]), spans)
    assert not exact_span_evidence(rubric([text]), tree)  # written statements (Fig. 10) carry no offsets
    assert not exact_span_evidence(rubric([text[:-1]]), spans)  # a paraphrase or a cut is not a span
    assert not exact_span_evidence(rubric([text], leaves=("n2",)), spans)  # only the rubric's own source leaves
    assert not exact_span_evidence(rubric([]), spans)
