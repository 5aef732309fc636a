"""Deterministic rule checks: a clean candidate passes (and gets passage ids), each rule can fail."""

from __future__ import annotations

import math

import pytest

from rubricforge.config import Config
from rubricforge.pipelines.tree.rules import (
    check_criteria,
    check_rules,
    content_words,
    split_sentences,
    support,
)
from rubricforge.rubric_gen.baselines import retrieved_trace
from rubricforge.schema import Candidate, Criterion, Snippet
from support.trees import good_rubrics, tiny_tree

CFG = Config()


def _candidate(**changes) -> Candidate:
    fields = {"id": "t1--tree", "tree_id": "t1", "question": "Why do honey bee colonies matter for agriculture, "
              "and what threatens them?", "selected_leaf_ids": ["n2", "n3", "n4", "n5"], "rubrics": good_rubrics()}
    return Candidate(**{**fields, **changes})


def _fails(candidate: Candidate) -> list[str]:
    return check_rules(candidate, tiny_tree(), CFG)


def test_clean_candidate_passes_and_passage_ids_are_resolved():
    cand = _candidate()
    assert check_rules(cand, tiny_tree(), CFG) == []
    assert cand.rule_failures == []
    by_id = {r.id: r for r in cand.rubrics}
    assert by_id["R1"].passage_ids == ["p1"]
    assert by_id["R2"].passage_ids == ["p4"]
    assert by_id["R3"].passage_ids == ["p5"]  # matched in n3 although n5 is listed too
    assert by_id["R4"].passage_ids == []  # logical criteria carry no passages


def test_selected_ids_must_be_leaves_of_the_tree():
    fails = _fails(_candidate(selected_leaf_ids=["n2", "n3", "n4", "n5", "n1", "zz"]))
    assert "selected leaf 'n1' is an internal node, not a leaf of tree t1" in fails
    assert "selected leaf 'zz' is not a node of tree t1" in fails
    assert "no leaf selected" in _fails(_candidate(selected_leaf_ids=[], rubrics=[]))


def test_source_leaf_ids_must_be_selected():
    fails = _fails(_candidate(selected_leaf_ids=["n2", "n3", "n4"]))  # R3 and R4 cite n5
    assert "R3: source leaf 'n5' is not among the selected leaves" in fails
    assert "R4: source leaf 'n5' is not among the selected leaves" in fails


def test_factual_rubrics_need_sources_and_evidence():
    rubrics = good_rubrics()
    rubrics[0].evidence = []
    rubrics[1].source_leaf_ids = []
    fails = _fails(_candidate(rubrics=rubrics))
    assert "R1: factual rubric has no evidence" in fails
    assert "R2: factual rubric names no source leaf" in fails


def test_evidence_must_trace_to_a_statement_of_its_own_source_leaves():
    rubrics = good_rubrics()
    rubrics[0].evidence = ["Honey bees were domesticated in ancient Egypt around 2400 BC."]  # invented
    rubrics[1].source_leaf_ids = ["n3"]  # true statement, but of another leaf
    fails = _fails(_candidate(rubrics=rubrics))
    assert any(f.startswith("R1: evidence 'Honey bees were domesticated") and "< 0.75" in f for f in fails)
    assert any(f.startswith("R2: evidence ") for f in fails)
    assert rubrics[0].passage_ids == []


def test_evidence_match_tolerates_quoting_part_and_spelling_but_not_new_facts():
    statement = "Almond orchards in California depend almost entirely on rented honey bee colonies."
    assert support("almond orchards depend on rented honey bee colonies", statement) == 1.0
    assert support("Almond orchards in Californa depend entirely on rented colonies", statement) == 1.0  # typo
    assert support("Almond orchards in Spain depend on wild bumblebees", statement) < 0.75
    assert support("the of and", statement) == 0.0
    assert content_words("The bees' hives") == ["bee", "hive"]


@pytest.mark.parametrize("weight", [1.5, -2.0, math.nan, math.inf])
def test_weights_must_be_finite_and_in_range(weight):
    rubrics = good_rubrics()
    rubrics[4].weight = weight
    assert any(f.startswith(f"R5: weight {weight}") for f in _fails(_candidate(rubrics=rubrics)))


def test_at_least_one_positive_weight_and_negative_weights_allowed():
    rubrics = good_rubrics()
    rubrics[4].weight = -0.5  # a debunking criterion is fine
    assert _fails(_candidate(rubrics=rubrics)) == []
    for r in rubrics:
        r.weight = -abs(r.weight) if r.weight else 0.0
    assert "no rubric has a positive weight" in _fails(_candidate(rubrics=rubrics))


def test_duplicate_criteria_are_flagged():
    rubrics = good_rubrics()
    rubrics.append(Criterion(id="R6", type="logical", weight=0.4,
                             description="organises the answer into causes, consequences and an evidence-based conclusion"))
    rubrics.append(Criterion(id="R7", type="logical", weight=0.4,
                             description="Compares managed honey bees with wild pollinators, explaining the trade-offs."))
    fails = _fails(_candidate(rubrics=rubrics))
    assert any(f.startswith("R5 and R6 are duplicates") for f in fails)
    assert any(f.startswith("R4 and R7 are duplicates") for f in fails)
    assert not any(f.startswith("R1 and") for f in fails)


def test_rubric_text_must_not_leak_into_the_question():
    question = ("Why do honey bees matter? Explain why the Varroa mite, a spreader of viruses that weaken "
                "colonies, matters for agriculture.")
    fails = _fails(_candidate(question=question))
    assert any(f.startswith("R2: description leaks into the question") for f in fails)
    # sharing topic words is not a leak
    assert _fails(_candidate(question="How do honey bee colonies and wild pollinators affect crops?")) == []


@pytest.mark.parametrize("question, ok", [
    ("How do honey bee colonies and wild pollinators affect crops?", True),
    ("What limits honey bee colonies, and how? Which pollinators replace them?", True),
    ("What are the significant threats to honey bees, and how do ... 2. How has the habitat changed? 3. What", False),
    ("1. Why do bees matter? 2. What harms them? 3. What helps them?", False),
    ("Honey bees pollinate a third of human food crops.", False)])
def test_the_question_is_one_question_ending_with_a_question_mark(question, ok):
    """A verifier's revised question that was cut off or became a list (seen with the 1.5B) fails."""
    fails = [f for f in _fails(_candidate(question=question)) if f.startswith("question is not one question")]
    assert (fails == []) is ok


def test_too_few_rubrics_empty_question_and_empty_description():
    rubrics = good_rubrics()[:3]
    rubrics[2].description = " "
    fails = _fails(_candidate(question="", rubrics=rubrics))
    assert "only 3 rubrics; at least 5 required" in fails
    assert "question is empty" in fails
    assert "R3: empty description" in fails
    assert "6 rubrics; at most 5 allowed" in check_criteria("q", good_rubrics() + [
        Criterion(id="R6", type="logical", weight=0.1, description="Uses clear headings.")], None,
        min_rubrics=5, max_rubrics=5)


def test_generation_error_is_the_only_reason_reported():
    cand = _candidate(question="", rubrics=[], generation_error="no JSON object in the output")
    assert _fails(cand) == ["generator output unusable: no JSON object in the output"]


def test_search_source_checks_against_retrieved_passages():
    snippets = [Snippet(id="S1", passage_id="p1", text="Honey bees pollinate about one third of the crops humans eat. "
                        "They are managed by beekeepers."), Snippet(id="S2", passage_id="p4", text="Varroa mites spread viruses.")]
    rubrics = good_rubrics()
    rubrics[0].source_leaf_ids = ["S1"]
    rubrics[1].source_leaf_ids = ["S2"]
    rubrics[1].evidence = ["Varroa mites spread viruses"]
    rubrics[2].source_leaf_ids = ["S1"]  # its evidence is not in S1
    rubrics[3].source_leaf_ids = []
    cand = _candidate(id="t1--search", rubric_source="search", selected_leaf_ids=["S1", "S2", "S9"],
                      selection_trace=retrieved_trace(snippets), rubrics=rubrics)
    fails = _fails(cand)
    assert "selected passage 'S9' was not retrieved for this question" in fails
    assert any(f.startswith("R3: evidence ") for f in fails)
    assert not any(f.startswith(("R1", "R2")) for f in fails)
    assert rubrics[0].passage_ids == ["p1"] and rubrics[1].passage_ids == ["p4"]
    assert [s.text for s in split_sentences(snippets[0].text, "p1")] == [
        "Honey bees pollinate about one third of the crops humans eat.", "They are managed by beekeepers."]


def test_closed_book_skips_grounding_but_keeps_the_other_rules():
    rubrics = good_rubrics()
    for r in rubrics:
        r.source_leaf_ids, r.evidence = [], []
    cand = _candidate(id="t1--closed-book", rubric_source="closed-book", selected_leaf_ids=[], rubrics=rubrics)
    assert _fails(cand) == []
    rubrics[1].weight = 3.0
    assert _fails(cand) == ["R2: weight 3.0 is not a finite number in [-1, 1]"]


def test_word_matching_is_difflibs_close_match_or_a_shared_stem():
    from difflib import get_close_matches

    from rubricforge.pipelines.tree.rules import WORD_FUZZ, _same_stem, _word_found

    vocabulary = {"colour", "temperatures", "photosynthesis", "mitochondria", "organisation", "rivers"}
    for word in ["color", "temperature", "photosynthetic", "mitochondrion", "organization", "river", "planet",
                 "organism", "synthesis", "temp", "colours"]:
        expected = word in vocabulary or (len(word) >= 5 and (any(_same_stem(word, v) for v in vocabulary)
                                                               or bool(get_close_matches(word, vocabulary, 1, WORD_FUZZ))))
        assert _word_found(word, vocabulary) == expected, word


def test_word_similarity_bounds_reject_only_pairs_difflib_rejects():
    """_similar's cheap bounds (lengths, characters the other word lacks) never reject a pair that a shared
    stem or difflib's close match accepts: checked over every pair of words of a few paragraphs."""
    from difflib import SequenceMatcher

    from rubricforge.pipelines.tree.rules import WORD_FUZZ, _same_stem, _similar

    text = ("The organisation of honeybee colonies; organization and organisms. Pollinators pollinate crops, "
            "pollination declines, colony collapse disorder. Temperatures, temperature, temporal, tempered. "
            "Photosynthesis, photosynthetic, synthesis, synthetic. Explains, explaining, explained, explanation, "
            "mitochondria, mitochondrion, commitments, committees, comparing, compares, comparison, colour, colors")
    words = sorted(set(content_words(text)))
    accepted = 0
    for a in words:
        for b in words:
            m = SequenceMatcher(None, b, a)
            expected = _same_stem(a, b) or (m.real_quick_ratio() >= WORD_FUZZ and m.quick_ratio() >= WORD_FUZZ
                                            and m.ratio() >= WORD_FUZZ)
            assert _similar(a, b) == expected, (a, b)
            accepted += expected and a != b
    assert accepted >= 20  # the words hold many near pairs, so the test compares both outcomes


def test_question_clauses_split_at_conjunctions_before_question_words_not_inside_lists():
    from rubricforge.pipelines.tree.rules import question_clauses

    assert question_clauses("What are the main characteristics of moths, and how do they compare to other insects "
                            "while considering the risks of silk moths?") == [
        "What are the main characteristics of moths", "how do they compare to other insects", "the risks of silk moths"]
    assert question_clauses("How did trade in Europe, Asia and Africa shape cities?") == [
        "How did trade in Europe, Asia and Africa shape cities"]


def test_a_clause_no_rubric_checks_fails_coverage_and_a_covered_one_passes():
    from rubricforge.pipelines.tree.rules import coverage_failures

    def orthogonal(texts):  # every text its own direction: only the word test can cover a clause
        import numpy as np

        return np.eye(len(texts))

    rubrics = [Criterion(id="R1", description="States that honey bees pollinate crops.", weight=1.0),
               Criterion(id="R2", description="Explains how the Varroa mite weakens colonies.", weight=1.0)]
    assert coverage_failures("Why do honey bees pollinate crops, and how does the Varroa mite weaken colonies?",
                             rubrics, orthogonal) == []
    [failure] = coverage_failures("Why do honey bees pollinate crops, and what are the failures of beekeeping "
                                  "regulation?", rubrics, orthogonal)
    assert failure.startswith("question clause 'what are the failures of beekeeping regulation' is checked by no rubric")


def test_a_question_narrowed_to_its_covered_clauses_keeps_its_first_clause_and_connectors():
    from rubricforge.pipelines.tree.rules import clause_failures, coverage_failures, narrowed_question

    def orthogonal(texts):
        import numpy as np

        return np.eye(len(texts))

    rubrics = [Criterion(id="R1", description="States that Philip Glass composed Einstein on the Beach.", weight=1.0),
               Criterion(id="R2", description="Explains how minimalism uses repeated phrases.", weight=1.0)]
    question = ("What are some of Philip Glass's most famous works, when was he born, and how does minimalism use "
                "repeated phrases?")
    narrowed = narrowed_question(question, clause_failures(question, rubrics, orthogonal))
    assert narrowed == "What are some of Philip Glass's most famous works, and how does minimalism use repeated phrases?"
    assert coverage_failures(narrowed, rubrics, orthogonal) == []
    # nothing left to leave out; and a question whose first clause (naming the subject) fails gets no repair
    assert narrowed_question(narrowed, clause_failures(narrowed, rubrics, orthogonal)) is None
    first_uncovered = "When was the composer born, and how does minimalism use repeated phrases?"
    assert narrowed_question(first_uncovered, clause_failures(first_uncovered, rubrics, orthogonal)) is None


@pytest.mark.slow
def test_coverage_with_minilm_rejects_the_clergy_question_and_keeps_the_moth_question():
    """The two calibration cases of the module docstring, with the real embedding model."""
    from rubricforge.corpora.embedding import Embedder
    from rubricforge.pipelines.tree.rules import coverage_failures

    embed = Embedder().embed_queries

    def rubrics(*texts):
        return [Criterion(id=f"R{i}", description=t, weight=1.0) for i, t in enumerate(texts, 1)]

    clergy = rubrics("States that a priest is a religious leader authorized to perform sacred rituals of a religion.",
                     "States that a state religion is a religious body officially endorsed by the state.",
                     "States that religious law refers to ethical and moral codes taught by religious traditions.",
                     "Compares the role of priests with the role of state religions.",
                     "Distinguishes religious law from state religion.")
    failures = coverage_failures("What are the potential risks and failures of clergy in different religious traditions,"
                                 " and how do they compare to the alternatives to clergy in those traditions?",
                                 clergy, embed)
    assert "risks and failures of clergy" in failures[0]
    assert coverage_failures("What are the main characteristics of moths, and how do they contribute to the ecosystem?",
                             moth_rubrics(), embed)[0].startswith("question clause 'how do they contribute")
    moth = moth_rubrics()
    assert coverage_failures("What are the main characteristics of moths, and how do they compare to other insects "
                             "while considering the risks associated with domestic silk moths?", moth, embed) == []


def moth_rubrics() -> list[Criterion]:
    texts = ("States that moths are a group of insects in the order Lepidoptera that are not butterflies.",
             "States that Geometridae is a large family of moths.",
             "States that the domestic silk moth Bombyx mori is dependent on humans and cannot fly.",
             "Compares moths with butterflies.", "Explains how domestication made silk moths dependent on humans.")
    return [Criterion(id=f"R{i}", description=t, weight=1.0) for i, t in enumerate(texts, 1)]
