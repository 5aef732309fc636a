"""`rubricforge convert`: every format read and written, round trips on real DeepResearch Bench criteria,
rejects counted and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubricforge.errors import UserError
from rubricforge.export.convert import FORMATS, convert_file, detect_format, read_records, to_rubricforge_rows
from rubricforge.export.convert.drb import RACE_FIELDS
from rubricforge.rewards.deeprubric.rubric_reward import criteria_from, criterion_text
from support.cli import assert_user_error, cli
from support.exchanged_formats import RESEARCHRUBRICS, RUBRICHUB, VERLRUBRIC
from support.paths import DATA

DATA = DATA / "formats"
DRB = DATA / "drb_criteria.jsonl"
RUBRIC_FORMATS = ("drtulu", "openinstruct", "deeprubric", "rar", "healthbench", "rubrichub", "researchrubrics",
                  "verlrubric", "verl", "trl", "rubricforge")

# One record per format, written from each project's documented layout (see each module's docstring).
DRTULU_RUBRIC = {"source": "rar_medicine", "question_type": "long_form",
                 "messages": [{"role": "user", "content": "How is sepsis managed?"}],
                 "ground_truth": json.dumps({"query": "How is sepsis managed?", "rubrics": [
                     {"description": "Mentions early antibiotics", "weight": 5, "title": "Essential: antibiotics"},
                     {"description": "Recommends homeopathy", "weight": -2, "title": "Pitfall"}]}),
                 "dataset": "general_rubric"}
DRTULU_SHORT = {"source": "nq", "question_type": "exact_answer",
                "messages": [{"role": "user", "content": "Who wrote Hamlet?"}],
                "ground_truth": json.dumps(["William Shakespeare", "Shakespeare"]), "dataset": "rl_rag_exact_answer"}
DEEPRUBRIC = {"question": "Why did the Roman Republic fall?", "answer": "",
              "golden_answers": [{"type": "factual", "description": "States that Caesar crossed the Rubicon in 49 BC",
                                  "weight": 0.6, "evidence": ["Caesar crossed the Rubicon in 49 BC."]},
                                 {"type": "logical", "description": "Links land reform to unrest", "weight": 0.4}],
              "data_source": "long_form", "reward_model": "rubric"}
RAR = {"question": "Explain photosynthesis.", "reference_answer": "Plants turn light into chemical energy.",
       "rubric": [{"description": "Mentions chlorophyll", "title": "Essential Criteria", "weight": 5},
                  {"description": "Confuses it with respiration", "title": "Pitfall Criteria", "weight": -1}]}
RESEARCHQA = {"id": "rqa-1", "general_domain": "Science", "subdomain": "Biology", "field": "Genetics",
              "query": "What does CRISPR-Cas9 do?", "date": "2024-01",
              "rubric": [{"rubric_item": "Explains guide RNA targeting", "type": "general"},
                         {"rubric_item": "Cites a primary study", "type": "citation"}]}
HEALTHBENCH = {"prompt_id": "hb-7", "prompt": [{"role": "user", "content": "I have a fever of 39C, what do I do?"}],
               "rubrics": [{"criterion": "Advises seeing a doctor if it lasts over 3 days", "points": 7,
                            "tags": ["level:example", "axis:accuracy"]},
                           {"criterion": "Recommends antibiotics without a diagnosis", "points": -6, "tags": []}],
               "example_tags": ["theme:emergency"]}

OPENINSTRUCT = {**DRTULU_RUBRIC, "dataset": "rubric", "source": "rubric_rl"}


def drb_records() -> list[dict]:
    return [r for _, r in read_records(DRB)]


def race_only(rec: dict) -> dict:
    """A DRB record without the free-text notes some criteria carry (comment, aspect, ...)."""
    return {**rec, "criterions": {d: [{k: c[k] for k in RACE_FIELDS if k in c} for c in cs]
                                  for d, cs in rec["criterions"].items()}}


def test_drb_round_trip_on_the_real_criteria_file(tmp_path):
    rf, rej = convert_file(DRB, tmp_path / "rf.jsonl", "rubricforge")
    assert (rf.source_format, rf.converted, rej["total"]) == ("drb", 4, 0)
    back, _ = convert_file(tmp_path / "rf.jsonl", tmp_path / "criteria.jsonl", "drb")
    original = drb_records()
    assert back.rows == [race_only(r) for r in original]
    # record 46 carries an extra note ("aspect") that RACE never reads: the only difference
    assert back.rows[1] != original[1] and [race_only(r) for r in original][2] == original[2]
    row = rf.rows[2]  # id 51, English
    race = json.loads(row["race_rubrics"])
    assert row["id"] == "51" and row["question"] == original[2]["prompt"] == race["query"]
    n = sum(len(cs) for cs in original[2]["criterions"].values())
    assert len(row["rubrics"]) == n
    first_dim, crits = next(iter(original[2]["criterions"].items()))
    assert row["rubrics"][0]["weight"] == pytest.approx(original[2]["dimension_weight"][first_dim] * crits[0]["weight"])
    assert row["rubrics"][0]["title"] == f"{first_dim}: {crits[0]['criterion']}"


@pytest.mark.parametrize("fmt", RUBRIC_FORMATS)
def test_real_rubrics_survive_every_rubric_format(tmp_path, fmt):
    convert_file(DRB, tmp_path / "rf.jsonl", "rubricforge")
    out, rej = convert_file(tmp_path / "rf.jsonl", tmp_path / f"x.{fmt}.jsonl", fmt)
    assert rej["total"] == 0 and out.converted == 4
    back, rej = convert_file(tmp_path / f"x.{fmt}.jsonl", tmp_path / "back.jsonl", "rubricforge")
    assert back.source_format == fmt and rej["total"] == 0
    before = [r for _, r in read_records(tmp_path / "rf.jsonl")]
    for a, b in zip(before, back.rows, strict=True):
        assert b["question"] == a["question"]
        keep = ("description", "weight") if fmt in ("healthbench", "rubrichub", "verlrubric") else (
            "description", "weight", "title")
        assert [[r[k] for k in keep] for r in b["rubrics"]] == [[r[k] for k in keep] for r in a["rubrics"]]


def test_parquet_both_ways(tmp_path):
    convert_file(DRB, tmp_path / "v.parquet", "verl")
    back, rej = convert_file(tmp_path / "v.parquet", tmp_path / "rf.jsonl", "rubricforge")
    assert back.source_format == "verl" and back.converted == 4 and rej["total"] == 0
    assert back.rows[0]["question"] == drb_records()[0]["prompt"]


@pytest.mark.parametrize(("record", "fmt"), [(DRTULU_RUBRIC, "drtulu"), (DRTULU_SHORT, "drtulu"),
                                             (DEEPRUBRIC, "deeprubric"), (RAR, "rar"), (RESEARCHQA, "researchqa"),
                                             (HEALTHBENCH, "healthbench"), (OPENINSTRUCT, "openinstruct"),
                                             (RUBRICHUB, "rubrichub"), (RESEARCHRUBRICS, "researchrubrics"),
                                             (VERLRUBRIC, "verlrubric")])
def test_each_format_is_detected_and_read(record, fmt):
    assert detect_format(record) == fmt
    row = FORMATS[fmt].to_rubricforge(record, 0)
    assert row["question"] and (row["rubrics"] or row["answer"])
    assert FORMATS[fmt].to_rubricforge(FORMATS[fmt].from_rubricforge(row), 0)["question"] == row["question"]


def test_format_specific_readings():
    short = FORMATS["drtulu"].to_rubricforge(DRTULU_SHORT, 3)
    assert (short["id"], short["answer"], short["answer_aliases"], short["rubrics"]) == (
        "3", "William Shakespeare", ["Shakespeare"], [])
    rubric = FORMATS["drtulu"].to_rubricforge(DRTULU_RUBRIC, 0)
    assert [(r["weight"], r["type"], r["title"]) for r in rubric["rubrics"]] == [
        (5.0, None, "Essential: antibiotics"), (-2.0, None, "Pitfall")]
    deep = FORMATS["deeprubric"].to_rubricforge(DEEPRUBRIC, 0)
    assert deep["rubrics"][0]["type"] == "factual" and deep["rubrics"][0]["evidence"]
    rqa = FORMATS["researchqa"].to_rubricforge(RESEARCHQA, 0)
    assert [r["weight"] for r in rqa["rubrics"]] == [1.0, 1.0] and rqa["topic"] == "Genetics"
    hb = FORMATS["healthbench"].to_rubricforge(HEALTHBENCH, 0)
    assert [r["weight"] for r in hb["rubrics"]] == [7.0, -6.0] and hb["id"] == "hb-7"
    assert FORMATS["healthbench"].from_rubricforge(hb)["rubrics"] == HEALTHBENCH["rubrics"]
    # the tags travel beside the criterion, not in the title the judge is shown
    assert [(r["title"], r.get("tags")) for r in hb["rubrics"]] == [("", ["level:example", "axis:accuracy"]), ("", None)]
    assert all("level:" not in criterion_text(c) for c in criteria_from(hb["rubrics"]))
    assert FORMATS["researchqa"].from_rubricforge(rqa)["rubric"] == RESEARCHQA["rubric"]
    assert FORMATS["rar"].from_rubricforge(FORMATS["rar"].to_rubricforge(RAR, 0)) == RAR


@pytest.mark.parametrize(("record", "fmt"), [(RUBRICHUB, "rubrichub"), (RESEARCHRUBRICS, "researchrubrics"),
                                             (VERLRUBRIC, "verlrubric"), (OPENINSTRUCT, "openinstruct")])
def test_exchanged_layouts_round_trip_through_a_file(tmp_path, record, fmt):
    """Format -> rubricforge file -> the format again gives the record's question and criteria back, signed
    points and weights included; rubricforge's row holds what the rubric judge reads."""
    (tmp_path / "in.jsonl").write_text(json.dumps(record) + "\n")
    rf, rej = convert_file(tmp_path / "in.jsonl", tmp_path / "rf.jsonl", "rubricforge")
    assert rf.source_format == fmt and rej["total"] == 0
    row = rf.rows[0]
    assert criteria_from(row["rubrics"]) and any(r["weight"] < 0 for r in row["rubrics"])
    back, rej = convert_file(tmp_path / "rf.jsonl", tmp_path / "back.jsonl", fmt)
    assert rej["total"] == 0
    out = back.rows[0]
    if fmt == "openinstruct":
        assert out["dataset"] == "rubric" and out["messages"] == record["messages"]
        assert [(r["description"], r["weight"]) for r in json.loads(out["ground_truth"])["rubrics"]] == [
            (r["description"], r["weight"]) for r in json.loads(record["ground_truth"])["rubrics"]]
    else:
        path = ("extra_info", "reward_model", "rubrics") if fmt == "verlrubric" else ("rubrics",)
        got, want = out, record
        for key in path:
            got, want = got[key], want[key]
        assert got == want
        question = "prompt" if fmt in ("researchrubrics", "verlrubric") else "question"
        assert out[question] == record[question]


def test_exchanged_layouts_specific_readings():
    rh = FORMATS["rubrichub"].to_rubricforge(RUBRICHUB, 0)
    assert rh["id"] == "rh-0193" and [r["weight"] for r in rh["rubrics"]] == [10.0, -10.0, 3.0]
    rr = FORMATS["researchrubrics"].to_rubricforge(RESEARCHRUBRICS, 0)
    assert rr["id"] == "6839f0a5c1" and [(r["weight"], r["title"]) for r in rr["rubrics"]] == [
        (5.0, "Explicit Criteria"), (4.0, "References"), (-3.0, "Synthesis of Information")]
    vr = FORMATS["verlrubric"].to_rubricforge(VERLRUBRIC, 4)
    assert vr["id"] == "4" and vr["question"].startswith("My toddler") and vr["rubrics"][1]["tags"]
    written = FORMATS["verlrubric"].from_rubricforge(vr, "mydata")
    assert written["data_source"] == "mydata" and written["reward_model"]["style"] == "rubric"
    # open-instruct's verifier is named "rubric"; DR Tulu's "general_rubric": the same ground truth, two names
    assert FORMATS["openinstruct"].to_rubricforge(OPENINSTRUCT, 0) == FORMATS["drtulu"].to_rubricforge(DRTULU_RUBRIC, 0)
    assert detect_format(DRTULU_RUBRIC) == "drtulu"
    with pytest.raises(ValueError, match="no rubrics"):
        FORMATS["openinstruct"].from_rubricforge(FORMATS["drtulu"].to_rubricforge(DRTULU_SHORT, 0))
    # a rubricforge short-answer row (empty rubrics) is not mistaken for a list-of-criteria format
    assert detect_format({"id": "k", "question": "Q?", "rubrics": [], "answer": "A"}) == "rubricforge"


def test_bad_exchanged_rows_name_file_row_and_field(tmp_path):
    bad = {**RUBRICHUB, "rubrics": [*RUBRICHUB["rubrics"], {"criterion": "Uses an analogy", "points": "high"}]}
    src = tmp_path / "rubrichub.jsonl"
    src.write_text(json.dumps(RUBRICHUB) + "\n" + json.dumps(bad) + "\n")
    proc = cli("eval", "--tasks", str(src), "--reports", str(src), "--run-dir", str(tmp_path / "run"))
    assert_user_error(proc, f"{src}: row 2 (rubrichub format) cannot be read: rubric 4 has no numeric weight")
    got, rej = convert_file(src, tmp_path / "rf.jsonl", "rubricforge")
    assert got.converted == 1 and rej["by_reason"] == {"rubric 4 has no numeric weight": 1}


def test_healthbench_tags_survive_a_rubricforge_file(tmp_path):
    (tmp_path / "hb.jsonl").write_text(json.dumps(HEALTHBENCH) + "\n")
    convert_file(tmp_path / "hb.jsonl", tmp_path / "rf.jsonl", "rubricforge")
    back, _ = convert_file(tmp_path / "rf.jsonl", tmp_path / "back.jsonl", "healthbench")
    assert back.rows[0]["rubrics"] == HEALTHBENCH["rubrics"]


def test_drtulu_rows_route_to_its_verifiers():
    """DR Tulu looks up ``dataset.lower()`` among its verifier names: general_rubric for rubric rows (ground
    truth {query, rubrics}), rl_rag_exact_answer for exact answers (ground truth: a JSON list of answers)."""
    rf = FORMATS["drtulu"]
    long = rf.from_rubricforge(rf.to_rubricforge(DRTULU_RUBRIC, 0))
    assert long["dataset"].lower() == "general_rubric"
    assert set(json.loads(long["ground_truth"])) == {"query", "rubrics"}
    short = rf.from_rubricforge({"id": "k1", "question": "Q?", "rubrics": [], "answer": "Paris",
                                 "answer_aliases": ["Paris, France"]})
    assert short["dataset"].lower() == "rl_rag_exact_answer" and short["question_type"] == "exact_answer"
    assert json.loads(short["ground_truth"]) == ["Paris", "Paris, France"]


def test_unconvertible_records_are_skipped_counted_and_written(tmp_path):
    src = tmp_path / "mixed.jsonl"
    bad_weight = {**RAR, "rubric": [{"description": "no weight here", "title": "x"}]}
    multi = {**HEALTHBENCH, "prompt": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                       {"role": "user", "content": "c"}]}
    src.write_text("\n".join([json.dumps(RAR), "{not json", json.dumps(bad_weight), json.dumps(RAR)]) + "\n")
    got, rej = convert_file(src, tmp_path / "out.jsonl", "drtulu")
    assert (got.converted, rej["total"]) == (2, 2)
    assert rej["by_reason"] == {"not valid JSON": 1, "rubric 1 has no numeric weight": 1}
    lines = [json.loads(x) for x in Path(rej["file"]).read_text().splitlines()]
    assert [x["line"] for x in lines] == [2, 3]
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2
    src2 = tmp_path / "hb.jsonl"
    src2.write_text(json.dumps(multi) + "\n")
    with pytest.raises(UserError, match="nothing converted from .*all 1 records were rejected .*2 user turns"):
        convert_file(src2, tmp_path / "hb_out.jsonl", "rubricforge")  # no row: an error, no empty output
    assert not (tmp_path / "hb_out.jsonl").exists() and (tmp_path / "hb_out.rejects.jsonl").is_file()


def test_unknown_formats_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="unknown format 'nope'"):
        convert_file(DRB, tmp_path / "x.jsonl", "nope")
    src = tmp_path / "odd.jsonl"
    src.write_text('{"foo": 1}\n')
    with pytest.raises(UserError, match="record 1 is in no known format"):
        convert_file(src, tmp_path / "x.jsonl", "rubricforge")
    assert not (tmp_path / "x.rejects.jsonl").exists()


def test_score_input_rows_are_converted_or_named(tmp_path):
    rows, found = to_rubricforge_rows("in.jsonl", [DRTULU_RUBRIC, DRTULU_SHORT])
    assert found == "drtulu" and [r["id"] for r in rows] == ["0", "1"]
    with pytest.raises(UserError, match=r"convert the file with `rubricforge convert in.jsonl OUT.jsonl --from rar`"):
        to_rubricforge_rows("in.jsonl", [RAR, {**RAR, "rubric": [{"description": "d"}]}])


def test_cli_convert_reports_counts_and_rejects(tmp_path):
    proc = cli("convert", str(DRB), str(tmp_path / "rdrb.jsonl"), "--to", "rubricforge")
    assert proc.returncode == 0, proc.stderr
    assert "converted 4 of 4 records drb -> rubricforge" in proc.stderr
    proc = cli("convert", str(DRB), str(tmp_path / "rqa.jsonl"), "--to", "researchqa")  # no row converts: exit 2
    assert_user_error(proc, "all 4 records were rejected", "weighted rubrics", "rqa.jsonl is left as it was")
    assert len((tmp_path / "rqa.rejects.jsonl").read_text().splitlines()) == 4 and not (tmp_path / "rqa.jsonl").exists()
    proc = cli("convert", str(DRB), str(tmp_path / "x.jsonl"), "--to", "nope")
    assert_user_error(proc, "unknown format 'nope'")


def test_reward_inputs_read_drb_criteria_as_scorable_examples():
    from rubricforge.io.datasets import load_examples
    from rubricforge.rewards.scorer import Rollout, _race_rubrics

    examples = load_examples(DRB, adapt=to_rubricforge_rows)
    assert list(examples) == ["1", "46", "51", "75"]
    ex = examples["51"]
    assert ex["question"].startswith("From 2020 to 2050") and ex["rubrics"][0]["type"] is None
    race = _race_rubrics(Rollout(ex, "report"))
    assert race.query == ex["question"] and set(race.dimension_weight) == {
        "comprehensiveness", "insight", "instruction_following", "readability"}


def test_rows_without_id_name_the_converter(tmp_path):
    from rubricforge.io.datasets import load_examples

    path = tmp_path / "drtulu.jsonl"
    path.write_text(json.dumps(DRTULU_RUBRIC) + "\n")
    with pytest.raises(UserError, match=r"has no 'id'.*rubricforge convert"):
        load_examples(path)  # training reads rubricforge rows only: the error names the converter
    assert list(load_examples(path, adapt=to_rubricforge_rows)) == ["0"]


def test_the_judge_sees_type_and_evidence_only_through_views_that_keep_them(tmp_path):
    """The README's scoring table: a rubricforge row shows the judge each criterion's type and a factual one's
    evidence; the same row through the DR Tulu view shows its title and description only (the format has
    no place for more), which is why the two views score the same responses differently."""
    from support.reward_fixtures import EXAMPLE
    from rubricforge.export.convert import get_format
    from rubricforge.rewards.deeprubric.rubric_reward import criteria_from, criterion_text

    def judge_views(row: dict) -> list[str]:
        return [criterion_text(c) for c in criteria_from(row["rubrics"])]

    native = judge_views(EXAMPLE)
    assert native[0] == ("ID: c1\nType: factual\nDescription: States the height of 330 metres.\n"
                         "Evidence:\n- The Eiffel Tower is 330 metres tall.")
    path = tmp_path / "drtulu.jsonl"
    path.write_text(json.dumps(get_format("drtulu").from_rubricforge(EXAMPLE)) + "\n")
    [row], _ = to_rubricforge_rows(path, [json.loads(path.read_text())])
    via_drtulu = judge_views(row)
    assert via_drtulu[0] == "ID: c1\nTitle: c1 factual\nDescription: States the height of 330 metres."
    assert all("Type:" not in v and "Evidence:" not in v for v in via_drtulu)
