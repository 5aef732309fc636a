"""Stage 3: the verifier's audit sample, KEEP / REVISE / DROP / UNPARSEABLE handling, and the final example."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from rubricforge.config import Config
from rubricforge.pipelines.tree.rules import check_rules
from rubricforge.pipelines.tree.verification import (VerifyOutput, audit_sample, final_example, is_retained, verify,
                                                      verify_messages)
from rubricforge.schema import Candidate, Verification
from support.replay_client import Capture, replay_client
from support.trees import good_rubrics, tiny_tree

PROVENANCE = {"models": {"generator": "gen-model", "verifier": "ver-model"}, "prompt_hashes": {"merge": "h1", "verify": "h2"}}
QUESTION = "Why do honey bee colonies matter for agriculture, and what threatens them?"


def checked_candidate(cfg: Config) -> Candidate:
    cand = Candidate(id="t1--tree", tree_id="t1", question=QUESTION, selected_leaf_ids=["n2", "n4", "n5"],
                     merge_trace=["n4+n5 -> pollination value", "n2 -> threats"], rubrics=good_rubrics()[:2] + good_rubrics()[3:])
    cand.rubrics.insert(2, good_rubrics()[0].model_copy(update={
        "id": "R3", "description": "Notes that California almond orchards rely on rented honey bee colonies.",
        "evidence": ["Almond orchards in California depend almost entirely on rented honey bee colonies."]}))
    assert check_rules(cand, tiny_tree(), cfg) == []
    return cand


def revised_rubrics(**change) -> list[dict]:
    rubrics = [
        {"id": "R1", "type": "factual", "weight": 0.9, "source_leaf_ids": ["n4"], "evidence": [
            "Honey bees pollinate about one third of the crops humans eat."],
         "description": "Quantifies the share of the crops humans eat that honey bees pollinate."},
        {"id": "R2", "type": "factual", "weight": 0.8, "source_leaf_ids": ["n2"], "evidence": [
            "Colony collapse disorder caused US beekeepers to lose 30 to 90 percent of their hives"],
         "description": "Reports the scale of hive losses from colony collapse disorder in 2006-2007."},
        {"id": "R3", "type": "logical", "weight": 0.7, "source_leaf_ids": ["n4", "n5"], "evidence": [],
         "description": "Weighs dependence on managed colonies against wild pollinator alternatives."},
        {"id": "R4", "type": "logical", "weight": 0.6, "source_leaf_ids": ["n2"], "evidence": [],
         "description": "Explains the causal chain from parasites and disease to pollination shortfalls."},
        {"id": "R5", "type": "logical", "weight": 0.4, "source_leaf_ids": [], "evidence": [],
         "description": "Ends with a conclusion that states remaining uncertainties."},
    ]
    rubrics[0].update(change)
    return rubrics


def _answer(decision: str, **fields) -> dict:
    return {"decision": decision, "error_tags": fields.pop("error_tags", []), "major_issues": [],
            "justification": "audited", "fix_plan": None, "revised_question": None, "revised_rubrics": None,
            "implementation_guidance": None, **fields}


def _verify(tmp_path, *answers):
    """The verification of the checked candidate, replayed from ``answers`` (one per verifier call, all used)."""
    cand = checked_candidate(Config())
    capture = Capture({"verify": list(answers)})
    asyncio.run(verify(cand, tiny_tree(), capture, Config()))
    assert capture.answers["verify"] == []
    verification = asyncio.run(verify(cand, tiny_tree(), replay_client(tmp_path, capture.calls), Config()))
    return cand, verification


def test_audit_sample_shows_only_selected_leaves_with_their_statements():
    cfg = Config()
    sample = audit_sample(checked_candidate(cfg), tiny_tree(), cfg)
    assert [leaf["id"] for leaf in sample["selected_leaves"]] == ["n2", "n4", "n5"]
    assert sample["selected_leaves"][1]["query"] == "crops that depend on honey bee pollination"
    assert sample["selected_leaves"][1]["evidence"][1].startswith("Almond orchards")
    assert sample["merge_trace"] == ["n4+n5 -> pollination value", "n2 -> threats"]
    assert set(sample["rubrics"][0]) == {"id", "type", "description", "weight", "source_leaf_ids", "evidence"}
    messages = verify_messages(sample)
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].startswith("You are an expert auditor for tree-rubric data")
    assert "revised_rubrics: Output 5–8 rubric objects." in messages[0]["content"]
    assert json.loads(messages[1]["content"]) == sample


def test_verify_output_model_is_tolerant_where_free_and_strict_on_the_decision():
    out = VerifyOutput.model_validate({"decision": " revise ", "error_tags": "scope", "fix_plan": [{"step": "narrow"}]})
    assert out.decision == "REVISE" and out.error_tags == ["scope"]
    with pytest.raises(ValidationError):
        VerifyOutput.model_validate({"decision": "MAYBE"})


def test_keep_becomes_an_example_with_provenance(tmp_path):
    cand, verification = _verify(tmp_path, _answer("KEEP"))
    assert verification.decision == "KEEP" and verification.rule_failures == []
    assert verification.revised_rubrics is None
    example = final_example(cand, verification, tiny_tree(), Config(), PROVENANCE)
    assert example is not None and example.question == QUESTION and example.decision == "KEEP"
    assert [r.id for r in example.rubrics] == ["R1", "R2", "R3", "R4", "R5"]
    prov = example.provenance
    assert prov.tree_id == "t1" and prov.leaf_ids == ["n2", "n4", "n5"]
    assert prov.passage_ids[:2] == ["p1", "p4"] and set(prov.passage_ids) == {"p1", "p2", "p3", "p4"}
    assert prov.corpus_hash == "c0ffee" and prov.models["verifier"] == "ver-model"
    assert prov.prompt_hashes == {"merge": "h1", "verify": "h2"}


def test_revise_uses_the_revision_after_it_passes_the_rules(tmp_path):
    revised_q = "How do pollination services and colony losses shape the agricultural value of honey bees?"
    cand, verification = _verify(tmp_path, _answer("REVISE", error_tags=["question-rubric mismatch"],
                                                   revised_question=revised_q, revised_rubrics=revised_rubrics()))
    assert verification.decision == "REVISE" and verification.rule_failures == []
    assert verification.revised_question == revised_q
    assert verification.revised_rubrics[1].passage_ids == ["p3"]
    example = final_example(cand, verification, tiny_tree(), Config(), PROVENANCE)
    assert example.question == revised_q and example.decision == "REVISE"
    assert example.rubrics[0].description.startswith("Quantifies")
    assert cand.question == QUESTION  # the candidate itself is untouched


def test_revise_with_failing_revision_is_asked_again_then_recorded_and_not_retained(tmp_path):
    bad = revised_rubrics(source_leaf_ids=["n3"])[:4]  # n3 is not selected; only 4 rubrics
    cand, verification = _verify(tmp_path, *[_answer("REVISE", revised_rubrics=bad)] * 2)
    assert "R1: source leaf 'n3' is not among the selected leaves" in verification.rule_failures
    assert "only 4 rubrics; at least 5 required" in verification.rule_failures
    assert [r["rule_failures"] for r in verification.rejected_revisions] == [verification.rule_failures]
    assert final_example(cand, verification, tiny_tree(), Config(), PROVENANCE) is None
    extra = ["Uses section headings.", "Cites a source for each figure.", "Defines technical terms on first use.",
             "Keeps the answer under two pages."]  # distinct: the repairs would remove restatements of one check
    too_many = revised_rubrics() + [dict(revised_rubrics()[4], id=f"R{i}", description=d)
                                    for i, d in enumerate(extra, start=6)]
    _, verification = _verify(tmp_path / "b", *[_answer("REVISE", revised_rubrics=too_many)] * 2)
    assert "9 rubrics; at most 8 allowed" in verification.rule_failures


def test_a_verifier_told_why_its_revision_fails_may_keep_the_original(tmp_path):
    """A small verifier "revised" a sound pair into duplicates (seen with the 1.5B): it is shown the failures and
    answers again; its last answer stands and the rejected revision stays on record."""
    duplicated = [revised_rubrics()[0], dict(revised_rubrics()[0], id="R2")] + revised_rubrics()[2:]
    cand = checked_candidate(Config())
    capture = Capture({"verify": [_answer("REVISE", revised_rubrics=duplicated), _answer("KEEP")]})
    verification = asyncio.run(verify(cand, tiny_tree(), capture, Config()))
    assert verification.decision == "KEEP" and verification.rule_failures == []
    [rejected] = verification.rejected_revisions
    assert rejected["rule_failures"] == ["R1 and R2 are duplicates (word overlap 1.00)"]
    assert [r["description"] for r in rejected["revised_rubrics"]][:2] == [duplicated[0]["description"]] * 2
    recheck = capture.calls[1][1]
    assert recheck[:-2] == verify_messages(audit_sample(cand, tiny_tree(), Config()))
    assert recheck[-2]["role"] == "assistant" and json.loads(recheck[-2]["content"])["decision"] == "REVISE"
    assert "R1 and R2 are duplicates (word overlap 1.00)" in recheck[-1]["content"]
    example = final_example(cand, verification, tiny_tree(), Config(), PROVENANCE)
    assert example is not None and example.question == QUESTION and example.decision == "KEEP"


def test_drop_follows_keep_decisions(tmp_path):
    cand, verification = _verify(tmp_path, _answer("DROP", major_issues=["shallow"]))
    assert verification.major_issues == ["shallow"]
    assert final_example(cand, verification, tiny_tree(), Config(), PROVENANCE) is None
    everything = Config.model_validate({"build": {"keep_decisions": ["KEEP", "REVISE", "DROP"]}})
    assert final_example(cand, verification, tiny_tree(), everything, PROVENANCE).decision == "DROP"
    only_keep = Config.model_validate({"build": {"keep_decisions": ["KEEP"]}})
    revise = Verification(candidate_id=cand.id, decision="REVISE")
    assert final_example(cand, revise, tiny_tree(), only_keep, PROVENANCE) is None


def test_unreadable_verifier_output_is_recorded_not_guessed(tmp_path):
    cand, verification = _verify(tmp_path, "I think this sample is fine, KEEP it.")
    assert verification.decision == "UNPARSEABLE"
    assert verification.raw and "KEEP it" in verification.raw
    assert verification.justification.startswith("verifier output unreadable")
    assert final_example(cand, verification, tiny_tree(), Config(), PROVENANCE) is None


def test_candidates_failing_rules_are_never_retained():
    cfg = Config()
    cand = checked_candidate(cfg)
    cand.rule_failures = ["R1: factual rubric has no evidence"]
    assert final_example(cand, Verification(candidate_id=cand.id, decision="KEEP"), tiny_tree(), cfg, PROVENANCE) is None


def test_a_candidate_whose_generation_failed_is_never_retained():
    cfg = Config()
    cand = checked_candidate(cfg)
    keep = Verification(candidate_id=cand.id, decision="KEEP")
    assert is_retained(cand, keep, cfg)
    cand.generation_error = "merge: no JSON after 2 re-prompts"
    assert not is_retained(cand, keep, cfg) and final_example(cand, keep, tiny_tree(), cfg, PROVENANCE) is None


@pytest.mark.slow
def test_real_local_model_synthesizes_and_verifies_a_tiny_tree(tmp_path):
    """The pipeline, not the quality: the default embedded model under the JSON grammar (stepwise merge)
    must yield a readable candidate and a readable verdict, whose fields are then checked by the rules."""
    from rubricforge.llm import LLMClient
    from rubricforge.pipelines.tree.synthesis import synthesize

    cfg = Config.model_validate({"llm": {"cache_path": str(tmp_path / "cache.sqlite")}})
    client = LLMClient(cfg.llm)
    tree = tiny_tree()

    async def run():
        cand = await synthesize(tree, client, cfg)
        check_rules(cand, tree, cfg)
        return cand, await verify(cand, tree, client, cfg)

    cand, verification = asyncio.run(run())
    assert cand.generation_error is None, cand.generation_error
    assert cand.id == "t1--tree" and cand.question.strip()
    assert cand.selected_leaf_ids and cand.rubrics
    assert all(r.type in ("factual", "logical") and r.description for r in cand.rubrics)
    assert all(isinstance(f, str) and f for f in cand.rule_failures)
    assert verification.candidate_id == cand.id and verification.decision in ("KEEP", "REVISE", "DROP")
    if verification.decision == "REVISE" and verification.revised_rubrics:
        assert all(r.type in ("factual", "logical") for r in verification.revised_rubrics)
    stages = client.ledger.summary()["by_stage"]
    assert stages["merge-select"]["calls"] == stages["merge-question"]["calls"] == 1
    # one verify call, and one more for each revision it was asked again for (a REVISE with none, or a failing one)
    assert stages["merge-criterion"]["calls"] == len(cand.selected_leaf_ids)
    assert stages["verify"]["calls"] == 1 + len(verification.rejected_revisions)
    example = final_example(cand, verification, tree, cfg, PROVENANCE)
    assert (example is None) == (not is_retained(cand, verification, cfg))  # the rule itself: the tests above


def test_provenance_prompt_names_are_real_prompt_files():
    from rubricforge.pipelines.prompting import prompt_hashes
    from rubricforge.pipelines.tree.verification import prompt_names

    hashes = prompt_hashes()
    cand = checked_candidate(Config())
    stepwise = cand.model_copy(update={"selection_trace": {"mode": "stepwise"}})
    search = cand.model_copy(update={"rubric_source": "search"})
    for c in (cand, stepwise, search, cand.model_copy(update={"rubric_source": "closed-book"})):
        assert all(name in hashes for name in prompt_names(c))
    assert "merge" in prompt_names(cand) and "merge_logical" in prompt_names(stepwise)
    assert "baseline_search" in prompt_names(search)
