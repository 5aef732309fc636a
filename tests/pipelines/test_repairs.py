"""The deterministic repairs (:mod:`rubricforge.pipelines.tree.repairs`), one per Table 7 category, on candidates
from real runs of the 1.5B: the rubrics are quoted from the issue and ``docs/results.md`` (the moth row of a fresh
``make run``, the Eiffel Tower rows of seed 4 and of a seed outside 0–9), their evidence is the default corpus's
sentences (the Wikipedia summaries the trees were built from). The embedding checks use the real MiniLM."""

from __future__ import annotations

import asyncio
import functools

import pytest

from rubricforge.config import Config
from rubricforge.pipelines.prompting import template
from rubricforge.pipelines.tree import repairs
from rubricforge.pipelines.tree.repairs import (CATEGORIES, count_repairs, pending_repairs, repair_candidate,
                                                repair_rubrics)
from rubricforge.pipelines.tree.rules import check_rules, evidence_pool
from rubricforge.schema import Candidate, Criterion, EvidenceTree
from support.trees import node

LEPIDOPTERA = "Lepidoptera or lepidopterans are an order of winged insects which include butterflies and moths."
GEOMETER = ("The geometer moths are moths belonging to the family Geometridae of the insect order Lepidoptera, "
            "the moths and butterflies.")
MILITARY = ("Military history is the study of armed conflict in the history of humanity, and its impact on the "
            "societies, cultures, and economies thereof, as well as the resulting changes to local and international "
            "relationships.")
EIFFEL = ("It is named after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to "
          "1889.")
PNT = ("In mathematics, the prime number theorem (PNT) describes the asymptotic distribution of prime numbers among "
       "the positive integers.")
EIFFEL_EXAMPLE = "States that the Eiffel Tower was completed in 1889 for the World's Fair."


def tree(root: str, *leaves: tuple[str, str, str]) -> EvidenceTree:
    """A root with one leaf per (id, query, statement)."""
    nodes = [node("n0", root, children=[i for i, _, _ in leaves])]
    nodes += [node(i, q, "n0", 1, statements=[(s, f"p-{i}")]) for i, q, s in leaves]
    return EvidenceTree(id="t", seed_passage_id="p0", seed_title=root, root_id="n0", nodes={n.id: n for n in nodes})


def rubric(rid: str, description: str, kind: str = "factual", leaf: str = "", evidence: str = "",
           weight: float = 0.9) -> Criterion:
    return Criterion(id=rid, type=kind, description=description, weight=weight, source_leaf_ids=[leaf] if leaf else [],
                     evidence=[evidence] if evidence else [])


MOTH_QUESTION = ("What are the main characteristics of moths that make them distinct from other insects, and how do "
                 "they compare to other insects in terms of their morphology and behavior?")


def moth_candidate() -> tuple[Candidate, EvidenceTree]:
    """The row of the fresh-clone ``make run`` (issue 34): R1 adds a claim, R3–R5 restate one comparison."""
    t = tree("Moth", ("n1", "moths as winged insects", LEPIDOPTERA), ("n2", "geometer moths", GEOMETER))
    rubrics = [rubric("R1", "States that moths are winged insects with a distinctive appearance and behavior.",
                      leaf="n1", evidence=LEPIDOPTERA),
               rubric("R2", "States that " + GEOMETER[0].lower() + GEOMETER[1:], leaf="n2", evidence=GEOMETER),
               rubric("R3", "Compares the appearance and behavior of moths with those of the geometer moths.", "logical"),
               rubric("R4", "Explains how the appearance and behavior of moths differ from those of the geometer moths.",
                      "logical"),
               rubric("R5", "Distinguishes the appearance and behavior of moths from those of the geometer moths.",
                      "logical")]
    return Candidate(id="t--tree", tree_id="t", question=MOTH_QUESTION, selected_leaf_ids=["n1", "n2"],
                     merge_trace=[{"step": "select", "output": ["n1", "n2"]}], rubrics=rubrics), t


@functools.cache
def minilm():
    from rubricforge.corpora.embedding import Embedder

    return Embedder().embed_queries


# ---------------------------------------------------------------- one repair per category


def test_a_factual_rubric_that_adds_a_claim_is_rewritten_from_its_span_and_traced():
    """Evidence sufficiency / grounding: "distinctive appearance and behavior" is not in the Lepidoptera sentence."""
    cand, t = moth_candidate()
    repair_candidate(cand, t, embed=None)
    [r1] = [r for r in cand.repairs if r.target == "R1"]
    assert (r1.action, r1.category) == ("rewritten", "Evidence sufficiency / grounding")
    assert "distinctive, appearance, behavior" in r1.reason
    assert r1.after == cand.rubrics[0].description == "States that " + LEPIDOPTERA
    assert cand.rubrics[0].evidence == [LEPIDOPTERA]
    assert cand.merge_trace[-len(cand.repairs):] == [{"step": "repair", **r.model_dump()} for r in cand.repairs]
    assert cand.rubrics[1].description.startswith("States that the geometer moths")  # R2 says what its span says


def test_logical_rubrics_that_restate_one_comparison_count_once_and_the_minimum_then_fails():
    """Rubric design / granularity: the moth row's R3–R5; the candidate then has 3 distinct rubrics, not 5."""
    cand, t = moth_candidate()
    repair_candidate(cand, t, embed=None)
    removed = [(r.target, r.category) for r in cand.repairs if r.action == "removed"]
    assert removed == [("R4", "Rubric design / granularity"), ("R5", "Rubric design / granularity")]
    assert [r.id for r in cand.rubrics] == ["R1", "R2", "R3"]
    assert "only 3 rubrics; at least 5 required" in check_rules(cand, t, Config())


def test_names_and_numbers_the_evidence_lacks_are_an_entity_mismatch():
    """Entity / domain / time mismatch: the Eiffel Tower sentence in a military-organisation row (a default build on
    a seed outside 0–9), its evidence a military-history sentence: rewritten from that sentence."""
    t = tree("Military organization", ("n1", "history of military organization", MILITARY))
    out, done = repair_rubrics("How has military organization changed in history?", "Military organization",
                               [rubric("R2", EIFFEL_EXAMPLE, leaf="n1", evidence=MILITARY)],
                               evidence_pool(Candidate(id="c", tree_id="t", question="q", selected_leaf_ids=["n1"]),
                                             t)[0], embed=None)
    [repair] = done
    assert (repair.action, repair.category) == ("rewritten", "Entity / domain / time mismatch")
    assert "eiffel, tower, world, fair, 1889" in repair.reason
    assert out[0].description == "States that Military history is the study of armed conflict in the history of " \
                                 "humanity, and its impact on the societies, cultures, and economies thereof, as well " \
                                 "as the resulting changes to local and international relationships."


def test_a_rubric_that_repeats_a_prompt_example_or_its_placeholder_is_removed(monkeypatch):
    placeholder = rubric("R1", "States that <the subject of the statements> is a moth.", leaf="n1", evidence=LEPIDOPTERA)
    _, [done] = repair_rubrics("q?", "Moth", [placeholder], None, embed=None)
    assert (done.action, done.category) == ("removed", "Entity / domain / time mismatch")
    assert "placeholder '<the subject of the statements>'" in done.reason
    monkeypatch.setattr(repairs, "prompt_examples", lambda: (EIFFEL_EXAMPLE,))
    copied = rubric("R2", "States that the Eiffel Tower was completed in 1889 for the World's Fair", "logical")
    kept, [done] = repair_rubrics("q?", "Prime number theorem", [copied], None, embed=None)
    assert kept == [] and done.reason.startswith("repeats the prompt example 'States that the Eiffel Tower")


def test_no_prompt_shows_an_example_sentence_a_small_model_could_copy():
    """The merge prompts' examples are placeholders (the 1.5B copied the Eiffel Tower example into rows)."""
    assert repairs.prompt_examples() == ()
    assert not any("Eiffel" in template(name) for name in repairs.PROMPT_NAMES)
    assert "<the subject of the statements>" in template("merge_criterion")


def test_a_negative_weight_without_evidence_of_what_it_debunks_is_removed():
    t = tree("Moth", ("n1", "moths", LEPIDOPTERA))
    pool = {"n1": t.nodes["n1"].statements}
    unjustified = rubric("R1", "Penalises answers that call moths butterflies.", "logical", weight=-0.5)
    justified = rubric("R2", "Claims that Lepidoptera are wingless.", leaf="n1", evidence=LEPIDOPTERA, weight=-0.5)
    kept, [done] = repair_rubrics("q?", "Moth", [unjustified, justified], pool, embed=None)
    assert kept == [justified]  # its evidence states what it debunks; the support check leaves it as it is
    assert (done.target, done.action, done.category) == ("R1", "removed", "Negative-weight rubric removal")


def test_an_off_topic_factual_rubric_and_a_logical_one_naming_it_are_removed():
    """Question–rubric mismatch, then entity mismatch: seed 4's prime-number-theorem row had an Eiffel Tower rubric
    (here with an Eiffel Tower sentence as its evidence, so the support check passes it through) and logical rubrics
    comparing the theorem with the tower."""
    t = tree("Prime number theorem", ("n1", "prime number theorem", PNT), ("n2", "history of the theorem", EIFFEL))
    question = ("How do the prime number theorem and the Riemann hypothesis relate to the distribution of prime "
                "numbers among the positive integers?")
    rubrics = [rubric("R1", "States that the prime number theorem describes the asymptotic distribution of prime "
                            "numbers among the positive integers.", leaf="n1", evidence=PNT),
               rubric("R2", "States that the tower is named after the engineer Gustave Eiffel, whose company built "
                            "it from 1887 to 1889.", leaf="n2", evidence=EIFFEL),
               rubric("R3", "Compares the prime number theorem with the Eiffel Tower.", "logical")]
    pool = {i: t.nodes[i].statements for i in ("n1", "n2")}
    kept, done = repair_rubrics(question, "Prime number theorem", rubrics, pool, embed=minilm())
    assert [r.id for r in kept] == ["R1"]
    assert [(r.target, r.category) for r in done] == [("R2", "Question–rubric mismatch"),
                                                      ("R3", "Entity / domain / time mismatch")]
    assert "eiffel, tower" in done[1].reason


def test_a_stitched_claim_is_rewritten_from_its_span_and_the_rewrite_then_found_off_topic():
    """Seed 8's cults row stated that cults "operate by using agricultural equipment for secondary tillage" from a
    tillage sentence: the support check restates the sentence, which the off-topic check then removes."""
    till = ("Examples of draft-animal-powered or mechanized work include ploughing, rototilling, rolling with "
            "cultipackers or other rollers, harrowing, and cultivating with cultivator shanks (teeth).")
    cult = ("Cults are social groups which have unusual, and often extreme, religious, spiritual, or philosophical "
            "beliefs and rituals.")
    t = tree("Cult", ("n1", "how cults operate", till), ("n2", "cults", cult))
    rubrics = [rubric("R1", "States that cults operate by using agricultural equipment for secondary tillage.",
                      leaf="n1", evidence=till),
               rubric("R2", "States that cults are social groups with unusual and often extreme religious beliefs "
                            "and rituals.", leaf="n2", evidence=cult)]
    kept, done = repair_rubrics("What are the key characteristics of cults and how do they operate?", "Cult", rubrics,
                                {i: t.nodes[i].statements for i in ("n1", "n2")}, embed=minilm())
    assert [r.id for r in kept] == ["R2"]
    assert [(r.action, r.category) for r in done] == [("rewritten", "Evidence sufficiency / grounding"),
                                                      ("removed", "Question–rubric mismatch")]
    assert done[1].before == done[0].after == "States that " + till


def test_near_identical_embeddings_count_once_and_a_factual_rubric_outlives_a_logical_one():
    rubrics = [rubric("R1", "Explains how moths belong to the insect order Lepidoptera.", "logical"),
               rubric("R2", "States that moths belong to the insect order Lepidoptera.", leaf="n1", evidence=LEPIDOPTERA),
               rubric("R3", "Compares moths with butterflies.", "logical")]
    kept, [done] = repair_rubrics("What are moths?", "Moth", rubrics, None, embed=minilm())
    assert [r.id for r in kept] == ["R2", "R3"]
    assert (done.target, done.category) == ("R1", "Rubric design / granularity") and "restates R2 (cosine" in done.reason


def test_a_narrowed_question_is_a_scope_repair_and_counts_are_by_category():
    cand, t = moth_candidate()
    cand.merge_trace = [{"step": "question", "output": MOTH_QUESTION},
                        {"step": "question", "rejected": ["clause 'how do they compare' is checked by no rubric"],
                         "narrowed": True, "output": "What are the main characteristics of moths?"}]
    repair_candidate(cand, t, embed=None)
    assert cand.repairs[0].category == "Question scope / merge overreach"
    assert (cand.repairs[0].before, cand.repairs[0].after) == (MOTH_QUESTION, "What are the main characteristics of moths?")
    counts = count_repairs(cand.repairs)
    assert list(counts) == list(CATEGORIES)
    assert counts["Rubric design / granularity"] == {"rewritten": 0, "removed": 2}
    assert counts["Question scope / merge overreach"] == {"rewritten": 1, "removed": 0}
    assert counts["Evidence sufficiency / grounding"] == {"rewritten": 1, "removed": 0}


def test_a_sound_candidate_is_left_as_it_is():
    from support.trees import good_rubrics, tiny_tree

    cand = Candidate(id="t1--tree", tree_id="t1", question="Why do honey bees matter for agriculture?",
                     selected_leaf_ids=["n2", "n3", "n4", "n5"], rubrics=good_rubrics()[:2] + good_rubrics()[3:])
    assert pending_repairs(cand, tiny_tree(), embed=minilm()) == []


# ---------------------------------------------------------------- REVISE is a repair or nothing


def test_a_revise_without_a_revision_is_asked_again_naming_the_issues_then_judged_by_the_repairs(tmp_path):
    from rubricforge.pipelines.tree.verification import final_example, verify
    from support.replay_client import Capture

    cand, t = moth_candidate()
    empty = {"decision": "REVISE", "error_tags": ["evidence sufficiency"],
             "major_issues": ["R1 claims more than its evidence"], "justification": "needs repair"}
    capture = Capture({"verify": [empty, empty]})
    verification = asyncio.run(verify(cand, t, capture, Config()))
    follow_up = capture.calls[1][1][-1]["content"]
    assert "neither a revised_question nor revised_rubrics" in follow_up and "R1 claims more than its evidence" in follow_up
    assert len(verification.rejected_revisions) == 1
    # the unrepaired candidate fails the repairs, so the REVISE keeps nothing
    assert any("R1: claims what its evidence does not state" in f for f in verification.rule_failures)
    provenance = {"models": {}, "prompt_hashes": {}}
    assert final_example(cand, verification, t, Config(), provenance) is None
    # once repaired (as the merge does), the same empty REVISE leaves a candidate that passes every repair
    repair_candidate(cand, t, embed=None)
    verification = asyncio.run(verify(cand, t, Capture({"verify": [empty, empty]}), Config()))
    assert verification.rule_failures == []


def test_a_revisions_rubrics_are_repaired_too(tmp_path):
    from rubricforge.pipelines.tree.verification import verify
    from support.replay_client import Capture

    cand, t = moth_candidate()
    repair_candidate(cand, t, embed=None)
    revised = [r.model_dump(include={"id", "type", "description", "weight", "source_leaf_ids", "evidence"})
               for r in moth_candidate()[0].rubrics]
    verification = asyncio.run(verify(cand, t, Capture({"verify": [{"decision": "REVISE", "revised_rubrics": revised}] * 2}),
                                      Config()))
    assert [(r.target, r.action) for r in verification.repairs] == [("R1", "rewritten"), ("R4", "removed"),
                                                                   ("R5", "removed")]
    assert "only 3 rubrics; at least 5 required" in verification.rule_failures


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_is_a_table7_reason(category):
    from rubricforge.export.stats import PAPER_TABLE7

    assert category in PAPER_TABLE7
