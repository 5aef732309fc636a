"""`rubricforge eval` end to end with the real embedded model (Qwen2.5-Coder-0.5B, llama.cpp) as the judge, on
two short tasks: a tree row judged on its two rubric criteria and a KG row's exact answer. Every judged metric
gets a value in [0, 1] or is counted unscored, and the same command again costs no judge call; and `--agent` with
the embedded 1.5B model answering two KG questions, whose reports a re-run does not make again."""

from __future__ import annotations

import json

import pytest

from support.cli import cli

pytestmark = pytest.mark.slow

TASKS = [{"id": "tree1", "question": "How tall is the Eiffel Tower?",
          "rubrics": [{"id": "c1", "type": "factual", "description": "States the height of about 330 metres.",
                       "weight": 1.0},
                      {"id": "c2", "type": "factual", "description": "Says that the tower is in Paris.", "weight": 0.5}]},
         {"id": "kg1", "question": "In which year was the Eiffel Tower completed?", "answer": "1889"}]
REPORTS = [{"id": "tree1", "response": "The Eiffel Tower in Paris is about 330 metres tall."},
           {"id": "kg1", "response": "<think>It opened for the 1889 World's Fair.</think><answer>1889</answer>"}]


def test_embedded_judge_scores_two_tasks_and_the_rerun_is_free(tmp_path):
    tasks, reports, run = tmp_path / "tasks.jsonl", tmp_path / "reports.jsonl", tmp_path / "run"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    reports.write_text("".join(json.dumps(r) + "\n" for r in REPORTS))
    args = ["eval", "--tasks", str(tasks), "--reports", str(reports), "--run-dir", str(run), "-q",
            "--set", "llm.judge.model=qwen2.5-coder-0.5b-instruct-q4", "--set", "llm.judge.max_tokens=32",
            "--set", f"llm.cache_path={tmp_path / 'cache.sqlite'}"]
    first = cli(*args)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"]["exact.em"]["mean"] == 1.0  # the <answer> block is the report
    rubric = summary["metrics"]["rubric"]
    assert rubric["n"] + rubric["unscored"] == 1
    done = 0 if rubric["n"] else 1  # a task the judge left unscored ends the run incomplete (exit 1)
    assert first.returncode == done, first.stderr[-2000:]
    records = {r["key"]: r for r in map(json.loads, (run / "tasks.jsonl").read_text().splitlines())}
    assert records["tree1"]["judge_calls"] == {"rubric": 2}  # one Figure 5 call per criterion
    if rubric["n"]:
        assert 0.0 <= records["tree1"]["metrics"]["rubric"] <= 1.0
        assert set(records["tree1"]["scores"]["rubric"]["per_criterion"]) == {"c1", "c2"}
    assert summary["judge"]["tokens_by_stage"]["rubric"]["prompt_tokens"] > 0

    again = cli(*args)
    if rubric["n"]:  # only valid answers are cached: an unscored task is asked again
        assert again.returncode == 0 and "(0 now" in again.stderr, again.stderr[-2000:]
        assert json.loads((run / "summary.json").read_text())["metrics"] == summary["metrics"]


def test_embedded_agent_answers_two_tasks_and_the_rerun_makes_nothing(tmp_path):
    """`--agent` with the embedded model (the default agent's model; no tools and a tiny answer, to stay short):
    two KG questions answered, scored by exact match and the equivalence judge, and nothing made again."""
    tasks, run = tmp_path / "tasks.jsonl", tmp_path / "run"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in (
        {"id": "kg1", "question": "In which year was the Eiffel Tower completed?", "answer": "1889"},
        {"id": "kg2", "question": "What is the capital of France?", "answer": "Paris"})))
    args = ["eval", "--tasks", str(tasks), "--agent", "tools=false,max_tokens=24", "--scorers", "exact,equivalence",
            "--run-dir", str(run), "-q", "--set", "llm.judge.max_tokens=64",
            "--set", f"llm.cache_path={tmp_path / 'cache.sqlite'}"]
    first = cli(*args, timeout=1200)  # two 1.5B loads (agent, judge); minutes on 2 busy cores
    assert first.returncode == 0, first.stderr[-2000:]
    assert "budget for 2 tasks: agent qwen2.5-coder-1.5b-instruct-q4 ~2 calls" in first.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["agent"]["reports"] == 2 and summary["agent"]["made_now"] == 2
    assert summary["agent"]["tokens_per_task"]["completion_tokens"] <= 24
    eq = summary["metrics"]["equivalence"]
    assert eq["n"] + eq["unscored"] == 2 and all(0.0 <= summary["metrics"][m]["mean"] <= 1.0 for m in ("exact.em", "exact.f1"))
    again = cli(*args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "0 reports made now" in again.stderr
    assert len((run / "reports.jsonl").read_text().splitlines()) == 2
