"""The quality gates as the dataset job's last stage before the export (:mod:`rubricforge.jobs.gates`): what they
drop is on the card, the learnability gate's LLM calls are in the run's ledger and on the card, and the export
only reads their record (``quality.json``)."""

from __future__ import annotations

import json

import pytest

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.export import export_dataset
from rubricforge.export.run import load_run
from rubricforge.io.files import atomic_write_json, read_json
from rubricforge.jobs.tree import export_run
from rubricforge.testing import FakeOpenAI
from support.fixtures_run import make_run
from support.llm_fakes import litellm_llm_config


def gates_off(**quality) -> dict:
    return {"embedding_threshold": None, "dedup_threshold": None, **quality}


def test_the_gate_stage_drops_contaminated_rows_and_the_card_says_so(tmp_path):
    run_dir = make_run(tmp_path)
    examples = load_run(run_dir).examples
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "b7", "prompt": examples[0].question}) + "\n")
    cfg = Config(run_dir=str(run_dir), quality=gates_off(benchmarks=["drb"], benchmark_files=[str(bench)], ngram=4))
    result = export_run(cfg, None)
    out = run_dir / "dataset"
    ids = [json.loads(x)["id"] for x in (out / "data.jsonl").read_text().splitlines()]
    assert examples[0].id not in ids and len(ids) == len(examples) - 1 == result.rows
    quality = json.loads((out / "stats.json").read_text())["quality"]
    assert quality["decontamination"]["dropped"] == 1 and quality["exported"] == len(ids)
    assert quality["dropped"][0]["benchmark"] == "bench" and quality["dropped"][0]["item_id"] == "b7"
    card = (out / "README.md").read_text()
    assert "## Quality gates" in card and "1 of " in card and "bench #b7" in card


def test_learnability_runs_in_the_job_and_its_calls_are_in_the_ledger_and_on_the_card(tmp_path):
    """The generator answers closed-book; the judge scores the answer with the example's rubric. The first
    example's answer meets every criterion (score 1.0 ≥ 0.8: too easy, dropped), the second's meets none. Those
    calls are the job's: the manifest's ledger and the card's cost table count them (they did not when the
    export ran the gate with a client of its own)."""
    run_dir = make_run(tmp_path)
    manifest = read_json(run_dir / "manifest.json")
    atomic_write_json(run_dir / "manifest.json", {**manifest, "invocations": [{"id": "inv1", "status": "complete"}]})
    easy, hard = load_run(run_dir).examples

    def prompt(body):
        return "\n".join(str(m.get("content", "")) for m in body["messages"])

    stages = {"closed_book_answer": lambda body: "EASY ANSWER" if easy.question in prompt(body) else "HARD ANSWER",
              "rubric": lambda body: json.dumps({"score": 4 if "EASY ANSWER" in prompt(body) else 0})}
    with FakeOpenAI(stages=stages) as server:
        cfg = Config(run_dir=str(run_dir), llm=litellm_llm_config(tmp_path, server),
                     quality=gates_off(learnability=True, drop_too_easy=True))
        result = export_run(cfg, None)
        calls = server.n_requests
        export_run(cfg, None)  # the LLM cache answers a re-export
        assert server.n_requests == calls
    assert calls == 2 + len(easy.rubrics) + len(hard.rubrics)
    out = run_dir / "dataset"
    assert [json.loads(x)["id"] for x in (out / "data.jsonl").read_text().splitlines()] == [hard.id]
    assert result.rows == 1
    learn = json.loads((out / "stats.json").read_text())["quality"]["learnability"]
    assert (learn["scored"], learn["too_easy"], learn["mean"], learn["drop"]) == (2, 1, 0.5, True)
    assert learn["histogram"]["0.0-0.1"] == 1 and learn["histogram"]["0.9-1.0"] == 1
    assert learn["flagged"] == [{"id": easy.id, "gate": "learnability", "method": "closed-book", "score": 1.0,
                                 "dropped": True}]
    ledger = read_json(run_dir / "manifest.json")["ledger"]
    assert ledger["by_stage"]["closed_book_answer"]["calls"] == 2
    assert ledger["total"]["calls"] == calls  # the re-export's cached answers are counted as cache hits
    card = (out / "README.md").read_text()
    assert "**Learnability**" in card and "| closed_book_answer |" in card


def test_the_export_reads_the_gate_record_and_refuses_one_older_than_the_run(tmp_path):
    run_dir = make_run(tmp_path)
    assert export_dataset(run_dir)["stats"]["quality"] == {"exported": 2}  # no gate stage ran: nothing dropped
    assert "No quality gates ran." in (run_dir / "dataset" / "README.md").read_text()
    atomic_write_json(run_dir / "quality.json", {"dropped": [], "gated": ["another-id"]})
    with pytest.raises(UserError, match="quality.json gated 1 examples but not 2"):
        export_dataset(run_dir)
