"""`rubricforge build --source report` (MindDR §4.6, App. 8.1–8.2; docs/methods.md M-1): short- and long-form Report-RL rows
that the existing Report-RL rewards can read; the generator is a scripted server (:mod:`pref_fakes`), the long
form's teacher trajectory searches a real index."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rubricforge.agent.mams import MamsConfig
from rubricforge.cli import app
from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.jobs.report_data import build_report_data, cut_tokens, outline_of
from rubricforge.rewards.scorer import check_columns
from rubricforge.rubric_gen.rubric_sets import read_race_file
from rubricforge.schema import RaceRubrics
from rubricforge.testing import FakeOpenAI, Reply
from support.config import derive
from support.llm_fakes import litellm_llm_config
from support.mams_agents import stepwise_teacher
from support.paths import DATA
from support.pref_fakes import REPORT_WRITER

DRB_CRITERIA = DATA / "prefs" / "drb_criteria_sample.jsonl"


def test_report_rows_have_what_the_report_reward_reads(tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": 1, "prompt": "Survey heat pumps in cold climates."}, {"id": 2, "query": "Compare DNS resolvers."},
        {"id": 3, "query": "BROKEN query"}]))
    with FakeOpenAI(stages=REPORT_WRITER) as server:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"),
                                          "llm": litellm_llm_config(tmp_path, server, structured_retries=0)}))
        args = ["build", "--source", "report", "--queries", str(queries), "-c", str(config), "-q"]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 1, res.output  # the BROKEN query's row is not made: re-run to retry it
        assert "2 short-form rows for 3 queries (failed: race_rubrics 1)" in res.output
        assert "incomplete: 1 of 3 rows not made" in res.output
        reference_prompt = next(r for r in server.requests if "considering the following dimensions" in json.dumps(r))
    rows = [json.loads(line) for line in (tmp_path / "run" / "report" / "data.jsonl").read_text().splitlines()]
    check_columns(rows, ["report"], "report data")
    assert [r["id"] for r in rows] == ["1", "2"] and rows[0]["form"] == "short"
    rubric = RaceRubrics.model_validate_json(rows[0]["race_rubrics"])
    assert sum(rubric.dimension_weight.values()) == pytest.approx(1, abs=1e-9)
    assert rows[0]["reference_report"].startswith("# Reference report")
    assert rows[0]["prompt"][1]["content"] == ("Based on the following user QUERY, write a report. User Query: Survey "
                                               "heat pumps in cold climates.. Generate the report directly.")
    user = reference_prompt["messages"][1]["content"]
    assert "comprehensiveness criterion" in user and user.endswith("Generate the report directly.")
    assert reference_prompt["messages"][0]["content"].startswith("You are a professional report generation agent")


def test_drb_criteria_with_extra_keys_load():
    rubrics = read_race_file(DRB_CRITERIA)  # criteria with aspect / comment / rationale_for_weight keys
    assert len(rubrics) == 3
    assert all(sum(r.dimension_weight.values()) == pytest.approx(1, abs=1e-6) for r in rubrics.values())


def teacher(fail_report: list[bool]) -> Any:
    """The three MaMs agents of a teacher trajectory (one stage, told apart by their system prompts): one search
    call, then an answer; the report agent fails (HTTP 400) while ``fail_report[0]``."""
    def respond(body: dict[str, Any]) -> Reply:
        system = str(body["messages"][0]["content"])
        if "Plan-Execute-Observe" in system:  # search agent (C.4 / C.5); answers at once for the "lazy" query
            user = str(body["messages"][1]["content"])
            first = "Remaining tool call chances: 3." in user and "lazy" not in user
            return Reply('<plan>- [ ] the making</plan>\n<tool_call>{"name": "search", "arguments": {"query": '
                         '["2001: A Space Odyssey Kubrick"]}}</tool_call>' if first else "<plan>- [x]</plan><answer>done</answer>")
        if "long-term memory" in system:  # state agent (C.6)
            return Reply("<memory>1968 film by Stanley Kubrick, co-written with Arthur C. Clarke.</memory>")
        if "structured analysis report" in system:  # report agent (C.8)
            if fail_report[0]:
                return Reply(status=400, error="bad request")
            return Reply("<report># 2001: A Space Odyssey\n\n## Making\n\nKubrick directed it<sup>[1]</sup>.\n\n"
                         "## Reception\n\nIt shaped science fiction.\n\n## References\n\n1. Wikipedia</report>")
        raise AssertionError(f"no MaMs agent has this system prompt: {system[:100]}")

    return respond


def test_long_form_row_is_a_teacher_trajectory_with_its_retrieval_data(small_index_cfg, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": "drb-1", "query": "How was the 1968 Kubrick film made?"}) + "\n"
                       + json.dumps({"id": "drb-2", "query": "A lazy question about pointillism?"}) + "\n")
    fail_report = [True]
    with FakeOpenAI(stages={**REPORT_WRITER, "teacher_trajectory": teacher(fail_report)}) as server:
        data = derive(small_index_cfg, "tools.top_k=2").model_dump(mode="json")
        cfg = Config.model_validate({**data, "run_dir": str(tmp_path / "run"),
                                     "llm": {**data["llm"], **litellm_llm_config(tmp_path, server, max_retries=0)}})
        failed = build_report_data(cfg, queries, forms=("long",), mams=MamsConfig(tool_budget=3),
                                   progress=False).summary
        # a failed call is no shorter report; a teacher that never searched has no report to give
        assert (failed.rows, failed.failed) == (0, {"teacher_trajectory": 1, "teacher_no_tool_call": 1})
        fail_report[0] = False
        done = build_report_data(cfg, queries, forms=("long", "short"), mams=MamsConfig(tool_budget=3),
                                 progress=False).summary
    assert (done.rows, done.failed) == (3, {"teacher_no_tool_call": 1})
    rows = [json.loads(line) for line in (tmp_path / "run" / "report" / "data.jsonl").read_text().splitlines()]
    check_columns(rows, ["report"], "report data")
    long, short, _ = rows
    assert (long["form"], short["form"], long["id"], short["id"], long["teacher_tool_calls"]) == ("long", "short", "drb-1#long",
                                                                                          "drb-1", 1)
    assert long["race_rubrics"] == short["race_rubrics"]  # one rubric for both forms (§4.6)
    assert long["reference_report"].startswith("# 2001: A Space Odyssey\n\n## Making")
    assert long["outline"] == "# 2001: A Space Odyssey\n## Making\n## Reception\n## References"
    assert long["retrieval_data"].count("<snippet id=") == 2 and "Kubrick" in long["retrieval_data"]  # the real index
    user = long["prompt"][1]["content"]
    assert user.startswith("Based on the following user QUERY, the retrieved information and the outline, write a "
                           "report. User Query: How was the 1968 Kubrick film made?.")
    assert long["retrieval_data"] in user and "## Reception" in user
    assert long["prompt"][0]["content"].startswith("You are a professional report generation agent")


def test_retrieval_data_is_cut_at_a_paragraph_within_the_budget():
    text = "a" * 30 + "\n\n" + "b" * 30
    assert cut_tokens(text, 10) == "a" * 30 and cut_tokens(text, 100) == text
    assert outline_of("intro\n# Title\ntext #not\n### Sub part\n#nospace") == "# Title\n### Sub part"


def test_stepwise_teacher_writes_a_long_form_row(small_index_cfg, tmp_path):
    from rubricforge.jobs.report_data import teacher_mode

    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": "drb-1", "query": "How was the 1968 Kubrick film made?"}) + "\n")
    with FakeOpenAI(stages={**REPORT_WRITER, "teacher_trajectory": stepwise_teacher}) as server:
        data = derive(small_index_cfg, "tools.top_k=2").model_dump(mode="json")
        cfg = Config.model_validate({**data, "run_dir": str(tmp_path / "run"),
                                     "llm": {**data["llm"], **litellm_llm_config(tmp_path, server, max_retries=0)}})
        assert teacher_mode(cfg) == "paper" and teacher_mode(Config()) == "stepwise"  # auto: the embedded model
        cfg.build.teacher = "stepwise"
        done = build_report_data(cfg, queries, forms=("long",), progress=False).summary
        searches = [r for r in server.requests if "Next plan item" in json.dumps(r)]
        outline_prompt = next(r for r in server.requests if "You are writing a deep research report" in json.dumps(r))
    assert (done.rows, done.failed) == (1, {})
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "report" / "data.jsonl").read_text().splitlines()]
    check_columns([row], ["report"], "report data")
    assert (row["id"], row["teacher_tool_calls"]) == ("drb-1#long", 2)
    assert row["provenance"]["models"]["generator"] and set(row["provenance"]["prompt_hashes"]) >= {
        "report_system", "report_policy_long"}
    assert row["outline"] == "# The making of 2001\n## Making\n## Release\n## Conclusion\n## References"
    report = row["reference_report"]
    assert report.startswith("# The making of 2001\n\n## Making\n\nThese facts show how the film was made. ")
    assert report.count("<sup>[") >= 3  # the facts, cited
    assert "\n\n## References\n\n1. " in report and "Title:" not in report
    assert row["retrieval_data"].count("<snippet id=") == 4  # two real searches over the index, 2 results each
    fact = outline_prompt["messages"][0]["content"].split("Part 1 (the making of the film):\n- ")[1].split("\n")[0]
    assert len(fact) > 20 and fact in row["retrieval_data"]  # the memory is sentences of the results, verbatim
    # the grammar sent with each search turn: "done" only after min_searches (2) searches; a repeated query ends
    actions = [r["response_format"]["json_schema"]["schema"]["properties"]["action"] for r in searches]
    assert actions[:2] == [{"const": "search", "title": "Action", "type": "string"}] * 2
    assert actions[2]["enum"] == ["search", "done"] and len(actions) == 3


def test_report_build_runs_the_preflight(tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": 1, "query": "Compare DNS resolvers."}) + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "llm": {"generator": {
        "backend": "litellm", "model": "openai/fake-model", "api_base": "http://127.0.0.1:9/v1"}}}))
    res = CliRunner().invoke(app, ["build", "--source", "report", "--queries", str(queries), "-c", str(config), "-q"])
    assert isinstance(res.exception, UserError)  # the CLI's entry point: its one line and exit code 2
    assert "llm.generator.api_base http://127.0.0.1:9/v1 cannot be reached" in str(res.exception)
    assert not (tmp_path / "run" / "report").exists()  # stopped before any work
