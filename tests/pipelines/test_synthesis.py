"""Stage 2: the Fig. 11 prompt, the tolerant/strict output model, and synthesis through the LLM client.

The LLM answers come from :func:`support.replay_client.replay_client` (a tiny hand-made recording).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from rubricforge.config import Config
from rubricforge.llm import LLMClient
from rubricforge.pipelines.tree.rules import check_rules
from rubricforge.pipelines.tree.serialize import serialize_tree
from rubricforge.pipelines.tree.synthesis import MergeOutput, RubricOut, candidate_id, merge_messages, synthesize, to_criteria
from support.replay_client import Capture, replay_client
from support.trees import QUESTION, good_rubrics, tiny_tree

SINGLE = Config.model_validate({"build": {"merge": "single"}})  # the paper's one-call merge (Fig. 11)


def _serialized(cfg: Config) -> str:
    b = cfg.build
    return serialize_tree(tiny_tree(), max_leaves=b.max_leaves, statements_per_leaf=b.statements_per_leaf,
                          max_chars=b.max_chars).text


def merge_answer(**change) -> dict:
    rubrics = [r.model_dump(include={"id", "type", "description", "weight", "source_leaf_ids", "evidence"})
               for r in good_rubrics()]
    return {"question": QUESTION, "selected_leaf_ids": ["n2", "n3", "n4", "n5"],
            "selection_trace": "n4/n5 cover pollination, n2 threats, n3 output",
            "merge_trace": [{"inputs": ["n4", "n5"], "output": "value of bee pollination", "rationale": "same facet"},
                            {"inputs": ["n2", "n3"], "output": "threats and output", "rationale": "colony health"}],
            "rubrics": rubrics, **change}


def test_merge_prompt_is_fig11_verbatim_with_the_tree_appended():
    text = _serialized(Config())
    [message] = merge_messages(text)
    assert message["role"] == "user"
    content = message["content"]
    assert content.startswith("You are an autonomous agent for proposing deep-research questions from a search tree.")
    assert "Every rubric MUST include source_leaf_ids ⊆ selected_leaf_ids." in content
    assert "Return JSON only: {question, selected_leaf_ids, selection_trace, merge_trace, rubrics}." in content
    assert content.endswith(text) and json.loads(content[content.index("\n{") + 1:]) == json.loads(text)


def test_output_model_is_tolerant_on_traces_and_strict_on_rubric_fields():
    out = MergeOutput.model_validate(merge_answer(selection_trace=["n4", {"leaf": "n5"}], merge_trace="free text"))
    assert out.merge_trace == "free text"
    r = RubricOut.model_validate({"id": 1, "type": " Factual", "description": "d", "weight": "0.5",
                                  "source_leaf_ids": "n4", "evidence": None})
    assert (r.id, r.type, r.weight, r.source_leaf_ids, r.evidence) == ("1", "factual", 0.5, ["n4"], [])
    for broken in ({"type": "opinion"}, {"weight": "high"}, {"description": None}):
        with pytest.raises(ValidationError):
            RubricOut.model_validate({"id": "R1", "type": "logical", "description": "d", "weight": 0.5,
                                      "source_leaf_ids": [], "evidence": [], **broken})
    with pytest.raises(ValidationError):  # source ids are what the rules need: required
        RubricOut.model_validate({"id": "R1", "type": "logical", "description": "d", "weight": 0.5, "evidence": []})
    # bounded in the schema (the grammar stops a looping model) without rejecting a long answer
    assert MergeOutput.model_json_schema()["properties"]["rubrics"]["maxItems"] == 12
    assert len(MergeOutput.model_validate(merge_answer(rubrics=merge_answer()["rubrics"] * 3)).rubrics) == 15


def test_to_criteria_keeps_unique_ids_and_numbers_the_rest():
    raw = [RubricOut(id=i, type="logical", description=f" d{n} ", weight=0.5, source_leaf_ids=[], evidence=[" ", "e"])
           for n, i in enumerate(["R1", "", "R1", "X"])]
    crit = to_criteria(raw)
    assert [c.id for c in crit] == ["R1", "R2", "R3", "X"]
    assert crit[0].description == "d0" and crit[0].evidence == ["e"]
    assert candidate_id("t1", "tree") == "t1--tree"


def test_synthesize_returns_a_candidate_that_passes_the_rules(tmp_path):
    cfg = SINGLE
    client = replay_client(tmp_path, [("generator", merge_messages(_serialized(cfg)), MergeOutput, "merge", merge_answer())])
    cand = asyncio.run(synthesize(tiny_tree(), client, cfg))
    assert cand.id == "t1--tree" and cand.tree_id == "t1" and cand.rubric_source == "tree"
    assert cand.question == QUESTION and cand.selected_leaf_ids == ["n2", "n3", "n4", "n5"]
    assert cand.merge_trace[0]["inputs"] == ["n4", "n5"]
    assert cand.tree_cut["leaves_cut"] == [] and cand.generation_error is None
    assert check_rules(cand, tiny_tree(), cfg) == []
    assert [r.passage_ids for r in cand.rubrics][:3] == [["p1"], ["p4"], ["p5"]]


def test_unreadable_generator_output_becomes_a_recorded_failure(tmp_path):
    cfg = SINGLE
    client = replay_client(tmp_path, [("generator", merge_messages(_serialized(cfg)), MergeOutput, "merge",
                                        "Sure! The question is ...")])
    cand = asyncio.run(synthesize(tiny_tree(), client, cfg))
    assert cand.generation_error and cand.raw and cand.rubrics == [] and cand.question == ""
    failures = check_rules(cand, tiny_tree(), cfg)
    assert failures == cand.rule_failures and failures[0].startswith("generator output unusable: ")


# ---------------------------------------------------------------- stepwise mode

STEPWISE = Config.model_validate({"build": {"merge": "stepwise"}})
STEP_ANSWERS = {
    "merge-select": [{"selected_leaf_ids": ["n4", "n2", "n4"]}],  # a repeated id counts once
    "merge-question": [{"question": QUESTION}],
    "merge-criterion": [
        {"description": "States that honey bees pollinate a third of human food crops.", "evidence_ids": ["E1"],
         "importance": "high"},
        {"description": "States that the Varroa mite spreads viruses that weaken colonies.",
         "evidence_ids": ["E2", "E2"], "importance": "medium"}],
    "merge-logical": [  # one call per kind of LOGICAL_KINDS
        {"fact_ids": ["F1", "F2"], "description": "Compares the value of pollination with the cost of colony losses.",
         "importance": "high"},
        {"fact_ids": ["F2", "F2"], "description": "Explains how mite-borne viruses shape the services a colony can give.",
         "importance": "medium"},
        {"fact_ids": ["F2", "F1"], "description": "Distinguishes well-established findings from disputed ones.",
         "importance": "low"}],
}


def stepwise_client(tmp_path, answers=STEP_ANSWERS) -> LLMClient:
    capture = Capture(answers)
    asyncio.run(synthesize(tiny_tree(), capture, STEPWISE))
    return replay_client(tmp_path, capture.calls)


def test_stepwise_merge_replayed_selects_leaves_writes_one_criterion_per_leaf_and_passes_the_rules(tmp_path):
    client = stepwise_client(tmp_path)
    cand = asyncio.run(synthesize(tiny_tree(), client, STEPWISE))
    assert cand.generation_error is None and cand.question == QUESTION
    assert cand.selected_leaf_ids == ["n4", "n2"]
    factual = [r for r in cand.rubrics if r.type == "factual"]
    assert [(r.source_leaf_ids, r.weight) for r in factual] == [(["n4"], 0.9), (["n2"], 0.6)]
    leaves = tiny_tree().nodes
    assert factual[0].evidence == [leaves["n4"].statements[0].text]  # chosen by id: the statement verbatim
    assert factual[1].evidence == [leaves["n2"].statements[1].text]
    assert [r.type for r in cand.rubrics] == ["factual"] * 2 + ["logical"] * 3  # min_rubrics 5 - 2 leaves
    assert [r.id for r in cand.rubrics] == ["R1", "R2", "R3", "R4", "R5"]
    assert [s["step"] for s in cand.merge_trace] == ["select", "question", "criterion", "criterion"] + ["logical"] * 3
    assert check_rules(cand, tiny_tree(), STEPWISE) == []
    assert [r.passage_ids for r in factual] == [["p1"], ["p4"]]
    by_stage = client.ledger.summary()["by_stage"]
    assert {k: int(v["calls"]) for k, v in by_stage.items()} == {
        "merge-select": 1, "merge-question": 1, "merge-criterion": 2, "merge-logical": 3}


def test_logical_rubrics_are_asked_for_one_kind_at_a_time_shown_the_facts_not_the_question():
    from rubricforge.pipelines.tree.synthesis import LOGICAL_KINDS

    capture = Capture(STEP_ANSWERS)
    asyncio.run(synthesize(tiny_tree(), capture, STEPWISE))
    prompts = [messages[0]["content"] for _, messages, _, stage, _ in capture.calls if stage == "merge-logical"]
    assert [f'of the kind "{kind}"' in p for p, (kind, _) in zip(prompts, LOGICAL_KINDS, strict=True)] == [True] * 3
    assert all("[F1] honey bees pollinate a third of human food crops." in p and QUESTION not in p for p in prompts)
    first = STEP_ANSWERS["merge-logical"][0]["description"]
    assert "already written" not in prompts[0] and f"already written:\n- {first} (relates F1 and F2)\n" in prompts[1]
    assert "relate another pair of facts" in prompts[1]


def test_a_logical_rubric_cites_the_leaves_of_the_facts_it_relates(tmp_path):
    cand = asyncio.run(synthesize(tiny_tree(), stepwise_client(tmp_path), STEPWISE))
    assert [r.source_leaf_ids for r in cand.rubrics if r.type == "logical"] == [["n4", "n2"], ["n2"], ["n2", "n4"]]


def test_a_rubric_step_that_repeats_an_earlier_rubric_is_asked_again_and_told_why(tmp_path):
    first, second = STEP_ANSWERS["merge-criterion"]
    client = stepwise_client(tmp_path, {**STEP_ANSWERS, "merge-criterion": [first, first, second]})
    cand = asyncio.run(synthesize(tiny_tree(), client, STEPWISE))
    assert [r.description for r in cand.rubrics[:2]] == [first["description"], second["description"]]
    assert check_rules(cand, tiny_tree(), STEPWISE) == []
    rejected = [s for s in cand.merge_trace if "rejected" in s]
    assert rejected == [{"step": "criterion", "inputs": ["n2"], "output": first["description"],
                         "rejected": ["R1 and R2 are duplicates (word overlap 1.00)"]}]
    assert client.ledger.summary()["by_stage"]["merge-criterion"]["calls"] == 3


def test_a_logical_rubric_that_restates_another_is_left_out_at_once_and_replaced_by_the_next_kind(tmp_path):
    """Issue 34: a restated comparison counts once, and the merge asks for another kind instead (no re-ask of the
    same kind, which the 1.5B answered with the same comparison reworded)."""
    compare, explain, distinguish = STEP_ANSWERS["merge-logical"]
    again = {**compare, "fact_ids": ["F2", "F1"]}  # the comparison once more
    replacement = {"fact_ids": ["F1", "F2"], "description": "Compares crop yields with hive health over time.",
                   "importance": "low"}
    client = stepwise_client(tmp_path, {**STEP_ANSWERS, "merge-logical": [compare, again, distinguish, replacement]})
    cand = asyncio.run(synthesize(tiny_tree(), client, STEPWISE))
    logical = [r.description for r in cand.rubrics if r.type == "logical"]
    assert logical == [compare["description"], distinguish["description"], replacement["description"]]
    [left_out] = [s for s in cand.merge_trace if "left_out" in s]
    assert left_out["output"] == compare["description"] and "duplicates" in left_out["left_out"][0]
    assert "R4 relates the same things as R3" in left_out["left_out"][-1]
    assert client.ledger.summary()["by_stage"]["merge-logical"]["calls"] == 4
    assert check_rules(cand, tiny_tree(), STEPWISE) == []  # the candidate goes on with 5 rubrics
    assert explain["description"] not in logical


def test_text_patterns_keep_the_json_string_closed():
    """llama.cpp turns a pattern's character class into grammar as it is: a class that allows '"' lets a small
    model close the JSON string early and leave the rest of the answer behind it (seen with the 1.5B)."""
    import re

    from rubricforge.pipelines.tree.synthesis import FACT_PATTERN, LOGICAL_KINDS, QUESTION_PATTERN

    assert re.match(FACT_PATTERN, "States that moths belong to the order Lepidoptera.")
    assert re.match(QUESTION_PATTERN, "How do moths differ from butterflies in classification?")
    assert not re.match(FACT_PATTERN, 'States that moths fly", "importance": "high"}.')
    logical = dict(LOGICAL_KINDS)
    for kind, example in [("comparison", "Compares moths with butterflies."),
                          ("cause and effect", "Explains how wing scales affect flight."),
                          ("distinction", "Distinguishes geometer moths from silk moths.")]:
        assert re.match(logical[kind], example)
        assert not re.match(logical[kind], example[:-1] + '", "importance": "high"}.')
        assert not re.match(logical[kind], "The answer should be well organized and clear.")


def test_stepwise_grammars_allow_only_the_ids_shown():
    from rubricforge.llm.structured import schema_of
    from rubricforge.pipelines.tree.synthesis import criterion_model, logical_model, select_model

    select = schema_of(select_model(("n2", "n4"), 2, 2))["properties"]["selected_leaf_ids"]
    assert select["items"]["enum"] == ["n2", "n4"] and (select["minItems"], select["maxItems"]) == (2, 2)
    evidence = schema_of(criterion_model(("E1", "E2")))["properties"]["evidence_ids"]
    assert evidence["items"]["enum"] == ["E1", "E2"]
    with pytest.raises(ValidationError):
        criterion_model(("E1",)).model_validate({"description": "d", "evidence_ids": ["E3"], "importance": "high"})
    logical = schema_of(logical_model(("F1", "F2"), "^Compares .+$"))["properties"]
    assert logical["fact_ids"]["items"]["enum"] == ["F1", "F2"] and logical["description"]["pattern"] == "^Compares .+$"


def test_a_failed_step_becomes_a_recorded_failure_naming_the_step(tmp_path):
    client = stepwise_client(tmp_path, {**STEP_ANSWERS, "merge-question": ["The question is about bees."]})
    cand = asyncio.run(synthesize(tiny_tree(), client, STEPWISE))
    assert cand.question == "" and cand.rubrics == []
    assert cand.generation_error.startswith("stepwise merge, step 'question'")
    assert cand.merge_trace == [{"step": "select", "inputs": ["n4", "n2", "n3", "n5"], "output": ["n4", "n2"]}]
    assert check_rules(cand, tiny_tree(), STEPWISE)[0].startswith("generator output unusable: stepwise merge")


def test_auto_merge_mode_is_stepwise_for_the_embedded_models_only():
    from rubricforge.pipelines.tree.synthesis import merge_mode

    assert merge_mode(Config()) == "stepwise"
    assert merge_mode(Config.model_validate({"llm": {"generator": {"model": "qwen2.5-coder-0.5b-instruct-q4"}}})) == "stepwise"
    assert merge_mode(Config.model_validate({"llm": {"generator": {"backend": "litellm", "model": "openai/gpt-4o"}}})) == "single"
    assert merge_mode(Config.model_validate({"build": {"merge": "single"}})) == "single"


def words_only(texts):
    """Orthogonal vectors: only the coverage test's word share decides."""
    import numpy as np

    return np.eye(len(texts))


def asked_twice(tmp_path, first: str, second: str):
    """The stepwise merge of the tiny tree whose question step answers ``first``, then ``second``: the candidate
    and the captured calls."""
    capture = Capture({**STEP_ANSWERS, "merge-question": [{"question": first}, {"question": second}]})
    asyncio.run(synthesize(tiny_tree(), capture, STEPWISE, embed=words_only))
    return asyncio.run(synthesize(tiny_tree(), replay_client(tmp_path, capture.calls), STEPWISE,
                                  embed=words_only)), capture.calls


def test_a_stepwise_question_its_rubrics_do_not_check_is_asked_again_once_told_why(tmp_path):
    on = "How do honey bees pollinate crops, and how does the Varroa mite weaken colonies?"
    cand, calls = asked_twice(tmp_path, "Why do honey bees pollinate crops, and what is the history of beekeeping "
                                        "regulation?", on)
    assert cand.question == on
    [retry] = [s for s in cand.merge_trace if "rejected" in s and s["step"] == "question"]
    assert retry["output"] == on and "history of beekeeping regulation" in retry["rejected"][0]
    retry_prompt = [m[0]["content"] for _, m, _, stage, _ in calls if stage == "merge-question"][1]
    assert "was rejected" in retry_prompt and "- States that honey bees pollinate" in retry_prompt


def test_a_question_still_uncovered_after_its_re_ask_is_narrowed_to_the_clauses_its_rubrics_check(tmp_path):
    cand, _ = asked_twice(tmp_path, "Why do honey bees pollinate crops, and what is the history of beekeeping "
                                    "regulation?", "How do honey bees pollinate crops, and who regulated beekeeping first?")
    assert cand.question == "How do honey bees pollinate crops?"
    assert cand.merge_trace[-1] == {"step": "question", "rejected": [cand.merge_trace[-1]["rejected"][0]],
                                    "narrowed": True, "output": "How do honey bees pollinate crops?"}
    assert "who regulated beekeeping first" in cand.merge_trace[-1]["rejected"][0]
    assert check_rules(cand, tiny_tree(), STEPWISE, embed=words_only) == []
