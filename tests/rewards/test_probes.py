"""The reward probes' variants (:mod:`rubricforge.rewards.probes`) on a hand-built rollout, what the format reward makes
of them, and the bad rubric sets refused before any judge call (:func:`rubricforge.rewards.scorer.check_rubrics`)."""

from __future__ import annotations

import pytest

from rubricforge.errors import UserError
from rubricforge.rewards import probes as P
from rubricforge.rewards.deeprubric.format_reward import format_reward
from rubricforge.rewards.scorer import check_rubrics
from rubricforge.rewards.trajectory import parse_trajectory
from support.reward_fixtures import ANSWER, EXAMPLE, ROLLOUT

OTHER = {"id": "ex2", "question": "Who painted the Mona Lisa in Florence?",
         "rubrics": [{"id": "c1", "description": "Names Leonardo da Vinci.", "weight": 1.0,
                      "evidence": ["Leonardo da Vinci painted the Mona Lisa."]}]}


def _ctx() -> P.Context:
    return P.Context(EXAMPLE, P.entity_pool([EXAMPLE, OTHER]))


def _answer(completion) -> str:
    return parse_trajectory(completion).answer


def test_each_probe_rewrites_only_the_answer_and_keeps_the_rollout():
    ctx = _ctx()
    for probe in P.BUILDERS:
        variant = P.make_variant(probe, ROLLOUT, ctx)
        assert variant is not None and variant.example is EXAMPLE
        assert variant.completion.startswith(ROLLOUT[:ROLLOUT.index("<answer>")])  # thoughts and tool calls kept
    assert _answer(P.make_variant("empty", ROLLOUT, ctx).completion) == ""
    assert _answer(P.make_variant("refusal", ROLLOUT, ctx).completion) == P.REFUSAL
    pasted = _answer(P.make_variant("rubric_paste", ROLLOUT, ctx).completion)
    assert pasted.startswith(ANSWER) and "States the height of 330 metres." in pasted
    padded = _answer(P.make_variant("padding", ROLLOUT, ctx).completion)
    assert padded.startswith(ANSWER) and len(padded) >= P.PAD_FACTOR * len(ANSWER) and P.FILLER in padded
    stuffed = _answer(P.make_variant("keyword_stuff", ROLLOUT, ctx).completion)
    assert "." not in stuffed and {"height", "metres", "eiffel", "tower"} <= set(stuffed.split())
    spam = _answer(P.make_variant("citation_spam", ROLLOUT, ctx).completion)
    assert spam.count(f'<cite id="{P.SPAM_IDS}">') == 3 and "s1aaaaaaaaa" not in spam


def test_wrong_facts_swaps_entities_and_numbers_deterministically():
    ctx = _ctx()
    wrong = _answer(P.make_variant("wrong_facts", ROLLOUT, ctx).completion)
    assert wrong == _answer(P.make_variant("wrong_facts", ROLLOUT, ctx).completion)  # the same input, the same variant
    assert "Eiffel Tower" not in wrong and "Paris" not in wrong and "330" not in wrong and "1889" not in wrong
    assert any(e in wrong for e in ("Leonardo", "Mona Lisa", "Florence", "Leonardo da Vinci"))
    assert P.entities_in("The tower stands in Paris. It was built by Gustave Eiffel.") == ["Paris", "Gustave Eiffel"]


def test_a_variant_identical_to_the_honest_response_is_no_item():
    ctx = P.Context({"id": "x", "question": "q", "rubrics": [{"id": "c1", "description": "d", "weight": 1}]}, [])
    honest = "<answer>all lower case, no numbers</answer>"
    assert P.make_variant("wrong_facts", honest, ctx) is None
    assert P.make_variant("criteria_order", honest, ctx) is None  # one criterion: no other order
    reordered = P.make_variant("criteria_order", ROLLOUT, _ctx())
    assert reordered.completion == ROLLOUT and [c["id"] for c in reordered.example["rubrics"]] == ["c3", "c2", "c1"]


def test_chat_message_rollouts_get_their_last_answer_rewritten():
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>t</think><answer>A.</answer>"}]
    out = P.make_variant("refusal", messages, _ctx()).completion
    assert out[0] == messages[0] and out[1]["content"] == f"<think>t</think><answer>{P.REFUSAL}</answer>"


def test_the_format_reward_pays_the_tag_soup_in_full():
    """The learning curve's tag soup, before any training: format_mimicry scores what the honest rollout scores."""
    honest = format_reward(parse_trajectory(ROLLOUT)).total
    soup = format_reward(parse_trajectory(P.make_variant("format_mimicry", ROLLOUT, _ctx()).completion)).total
    assert honest == soup == pytest.approx(1.0) and P.wins("format_mimicry", honest, soup)
    assert not P.wins("empty", honest, format_reward(parse_trajectory(P.make_variant("empty", ROLLOUT, _ctx()).completion)).total)
    assert P.wins("criteria_order", 0.5, 0.75) and not P.wins("criteria_order", 0.5, 0.5)


def _row(*rubrics) -> dict:
    return {"id": "row7", "question": "q", "rubrics": list(rubrics)}


@pytest.mark.parametrize(("row", "needles"), [
    (_row(), ["example 'row7' has an empty rubric list"]),
    (_row({"id": "c1", "description": "a", "weight": 1.0}, {"id": "c1", "description": "b", "weight": 1.0}),
     ["example 'row7' criterion id 'c1' is used twice (rubrics[0] and rubrics[1])"]),
    (_row({"id": "c1", "description": "a", "weight": 1.0}, {"id": "c2", "description": "   ", "weight": 1.0}),
     ["example 'row7' criterion 'c2' (rubrics[1]) has no text"]),
    (_row({"id": "c1", "weight": 1.0}), ["example 'row7' rubrics[0] has no 'description'"]),
    (_row({"id": "c1", "description": "a", "weight": 0.0}), ["example 'row7' criteria weights sum to 0", "'c1'"]),
    (_row({"id": "c1", "description": "a", "weight": 0.5}, {"id": "c2", "description": "b", "weight": -1.0}),
     ["criteria weights sum to -0.5"]),
])
def test_bad_rubric_sets_are_refused_naming_row_and_criterion(row, needles):
    with pytest.raises(UserError) as err:
        check_rubrics([EXAMPLE, row], ["rubric"], "data.jsonl")
    assert str(err.value).startswith("dataset data.jsonl: ") and "\n" not in str(err.value)
    for needle in needles:
        assert needle in str(err.value)
    check_rubrics([row], ["format", "search"], "data.jsonl")  # rewards that never read the rubrics do not care


def test_a_reference_answer_is_made_from_the_rows_factual_evidence():
    reference = P.reference_response(EXAMPLE)
    traj = parse_trajectory(reference)
    assert traj.answer == '<cite id="ref1">The Eiffel Tower is 330 metres tall.</cite>'  # c1's evidence, c3 is negative
    assert traj.snippet_texts() == {"ref1": "The Eiffel Tower is 330 metres tall."}
    assert format_reward(traj).total == pytest.approx(1.0)
    assert P.reference_response({"id": "x", "rubrics": [{"id": "c1", "type": "logical", "description": "d",
                                                         "weight": 1.0}]}) is None


def test_a_capitalised_word_opening_a_sentence_is_no_entity():
    text = "Around 1440 in Mainz, Johannes Gutenberg built a press. Connects books to literacy."
    assert P.entities_in(text) == ["Mainz", "Johannes Gutenberg"]
