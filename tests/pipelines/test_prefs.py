"""Preference pairs (Prefs §3.2, §4.1; docs/methods.md Q-1, Q-10): import checks, the topic-balanced split, and the
controlled degradations on a real DeepResearch Bench report."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from rubricforge.cli import app
from rubricforge.io.rejects import Rejects
from rubricforge.pipelines import preferences as prefs
from support.paths import DATA

FIXTURE = DATA / "prefs" / "drb_report_56.jsonl"


def _row(i: int, topic: str = "A", **extra) -> dict:
    return {"id": f"p{i}", "query": f"q{i}", "topic": topic, "report_chosen": f"good {i}",
            "report_rejected": f"bad {i}", **extra}


def test_split_is_topic_balanced_and_seeded():
    items = [(f"a{i}", "A") for i in range(10)] + [(f"b{i}", "B") for i in range(3)]
    splits = prefs.assign_splits(items, seed=0)
    counts = Counter((item_id[0], s) for item_id, s in splits.items())
    assert (counts["a", "train"], counts["a", "validation"], counts["a", "test"]) == (8, 1, 1)
    assert (counts["b", "train"], counts["b", "validation"], counts["b", "test"]) == (1, 1, 1)
    assert prefs.assign_splits(list(reversed(items)), seed=0) == splits  # same seed, same split
    assert prefs.assign_splits(items, seed=1) != splits


def test_read_pairs_rejects_bad_rows_and_keeps_given_splits(tmp_path):
    rows = [_row(0, split="train"), _row(1), _row(2, report_rejected="good 2"), _row(3, query=""),
            _row(4, split="dev"), _row(1), "not json", _row(5, language="fr")]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    rejects = Rejects(tmp_path / "rejects.jsonl")
    pairs = prefs.read_pairs(path, rejects)
    rejects.commit()
    assert [p.id for p in pairs] == ["p0", "p1"]
    assert pairs[0].split == "train"  # given splits are kept
    reasons = [json.loads(line)["reason"] for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert reasons[0] == "report_chosen equals report_rejected"
    assert reasons[1].startswith("query:") and reasons[2].startswith("split:")
    assert reasons[3] == "repeated id 'p1'" and reasons[4] == "not a JSON object" and reasons[5].startswith("language:")


def test_import_reads_parquet_and_bad_files_are_one_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([_row(i, topic="AB"[i % 2]) for i in range(8)]), tmp_path / "p.parquet")
    runner = CliRunner()
    out = tmp_path / "pairs.jsonl"
    res = runner.invoke(app, ["prefs", "import", str(tmp_path / "p.parquet"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    pairs = prefs.load_pairs(out)
    assert len(pairs) == 8 and {p.split for p in pairs} == {"train", "validation", "test"}
    res = runner.invoke(app, ["prefs", "import", str(tmp_path / "missing.jsonl"), "--out", str(out)],
                        standalone_mode=False)
    assert "preference file" in str(res.exception) and "not found" in str(res.exception)


def test_good_report_drops_chatter_and_cuts_whole_sections():
    text = ("Let me search for more.\n\n# Title\n\nIntro cites [1].\n\n## A\n\nSection A [2].\n\n## B\n\n"
            + "x" * 200 + " [3]\n\nReferences:\n[1] https://a.org - A\n[2] https://b.org - B\n[3] https://c.org - C\n")
    good = prefs.good_report(text, max_chars=60)
    assert good.startswith("# Title") and "Let me search" not in good
    assert "## A" in good and "## B" not in good  # B would pass the budget
    assert "[1] https://a.org" in good and "[2] https://b.org" in good and "c.org" not in good  # cited refs only


@pytest.fixture(scope="module")
def drb_pairs(tmp_path_factory) -> list:
    out = tmp_path_factory.mktemp("degrade") / "pairs.jsonl"
    res = CliRunner().invoke(app, ["prefs", "degrade", str(FIXTURE), "--out", str(out), "--max-chars", "3000",
                                   "--queries", str(FIXTURE.with_name("drb_query_56.jsonl"))])
    assert res.exit_code == 0, res.output
    return prefs.load_pairs(out)


def test_degradations_of_a_real_report_are_labelled_and_do_what_they_say(drb_pairs):
    by_kind = {p.degradation: p for p in drb_pairs}
    assert set(by_kind) == set(prefs.DEGRADATIONS)
    for kind, p in by_kind.items():
        assert p.id == f"56--{kind}" and p.topic == "Finance & Business" and p.language == "en"
        assert p.sources == {"chosen": "drb_report_56", "rejected": f"drb_report_56+{kind}"}
        assert p.report_chosen == by_kind["facts"].report_chosen  # one good report per query
    chosen = by_kind["facts"].report_chosen
    assert chosen.startswith("# General Methods") and "[4]" in chosen and "References" not in chosen[:100]
    assert "closed-form solution is known. [3]" in chosen
    facts = by_kind["facts"].report_rejected
    assert "significantly less challenging" in facts and len(facts.splitlines()) == len(chosen.splitlines())
    sections = by_kind["sections"].report_rejected
    assert prefs.sections(sections)[0] == prefs.sections(chosen)[0]
    assert len(prefs.sections(sections)) < len(prefs.sections(chosen))
    removed = by_kind["citations_removed"].report_rejected
    assert "[1]" not in removed and "https://" not in removed
    fabricated = prefs.Report.parse(by_kind["citations_fabricated"].report_rejected)
    assert fabricated.body == prefs.Report.parse(chosen).body
    assert all(".example/" in ref for ref in fabricated.references.values())
    padded = by_kind["padding"].report_rejected
    assert len(padded) > len(chosen) and any(s in padded for s in prefs._PADDING)


def test_a_degradation_that_does_not_apply_makes_no_pair(tmp_path):
    reports = tmp_path / "r.jsonl"
    reports.write_text(json.dumps({"id": 1, "prompt": "Why?", "article": "# T\n\nNo citations or numbers here."}) + "\n")
    rejects = Rejects()
    s = prefs.degrade_reports(reports, tmp_path / "p.jsonl", ["citations_removed", "padding"], rejects)
    assert s.pairs == 1 and s.not_applicable == {"citations_removed": 1}
    with pytest.raises(Exception, match="unknown degradation 'typos'"):
        prefs.degrade_reports(reports, tmp_path / "p.jsonl", ["typos"], rejects)
