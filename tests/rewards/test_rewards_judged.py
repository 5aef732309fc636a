"""The judge-based rewards over a scripted OpenAI-compatible judge (tests/support/reward_fixtures.py): exact
values of Eq. 4, A.4 and Eq. 5, RACE arithmetic, ORM majority votes, the tense LLM stage; unscored
judges give None, never 0; judge calls are cached, concurrent and shared between TRL reward functions."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from rubricforge.config import load_config
from rubricforge.errors import UserError
from rubricforge.llm import LLMClient
from rubricforge.rewards.deeprubric.citation_format import citation_format_reward
from rubricforge.rewards.deeprubric.citation_reward import NeedsCitation, Relevance, Support, citation_reward
from rubricforge.rewards.judging import Judge
from rubricforge.rewards.minddr.orm import majority, orm_reward
from rubricforge.rewards.minddr.race import RaceJudgement, race_score, score_judgement
from rubricforge.rewards.deeprubric.rubric_reward import criteria_from, rubric_reward
from rubricforge.rewards.scorer import RewardScorer, Rollout
from rubricforge.rewards.trl_rewards import reward_functions
from rubricforge.rubric_gen.race import generate_race_rubrics
from rubricforge.schema import RaceRubrics
from rubricforge.testing import FakeOpenAI, Reply
from support.llm_fakes import litellm_llm_config
from support.reward_fixtures import ANSWER, BAD, EXAMPLE, QUESTION, RACE, ROLLOUT, RUBRICS, S1, S2, SCRIPTED_JUDGE

SNIPPETS = {S1: "The Eiffel Tower is 330 metres tall.", S2: "It was completed in 1889 for the World's Fair."}


def _cfg(tmp_path, server, **role):
    return load_config(overrides={"llm": litellm_llm_config(tmp_path, server, **role)})


def _judge(tmp_path, server, **role) -> Judge:
    return Judge(LLMClient(_cfg(tmp_path, server, **role).llm))


def test_rubric_reward_is_the_positive_weight_normalised_mean(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        got = asyncio.run(rubric_reward(_judge(tmp_path, server), QUESTION, ANSWER, criteria_from(RUBRICS)))
    assert got.per_criterion == {"c1": 1.0, "c2": 0.5, "c3": 0.0}
    assert got.raw == pytest.approx((1.0 * 1.0 + 0.5 * 0.5 + -0.5 * 0.0) / 1.5)
    assert got.value == got.raw and got.unscored == 0
    # the judge saw the factual criterion's evidence, and one request per criterion
    prompts = [m["content"] for r in server.requests for m in r["messages"] if m["role"] == "user"]
    assert len(prompts) == 3 and any("Evidence:\n- The Eiffel Tower is 330 metres tall." in p for p in prompts)


def test_a_satisfied_negative_criterion_can_push_raw_below_zero_and_value_is_clipped(tmp_path):
    scores = {"c1": 0, "c2": 0, "c3": 4}

    def judge(body):
        cid = body["messages"][-1]["content"].split("<criterion>ID: ")[1].split()[0]
        return Reply(json.dumps({"score": scores[cid]}))

    rubrics = [{**r, "weight": -2.0} if r["id"] == "c3" else r for r in RUBRICS]
    with FakeOpenAI(responder=judge) as server:
        got = asyncio.run(rubric_reward(_judge(tmp_path, server), QUESTION, ANSWER, criteria_from(rubrics)))
    assert got.raw == pytest.approx(-2.0 / 1.5) and got.value == 0.0


def test_batched_mode_scores_every_criterion_in_one_call(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        got = asyncio.run(rubric_reward(_judge(tmp_path, server), QUESTION, ANSWER, criteria_from(RUBRICS),
                                        mode="batched"))
    assert got.per_criterion == {"c1": 1.0, "c2": 0.5, "c3": 0.0} and server.n_requests == 1


def test_a_criterion_the_batched_judge_leaves_out_is_resampled_then_unscored_and_never_cached(tmp_path):
    """An answer without c3 is re-prompted naming c3 (structured_retries = 1: one resample); still without it, the
    call is unscored — never a partial reward — and the next run asks again instead of replaying it."""
    partial = Reply(json.dumps({"scores": [{"id": "c1", "score": 4}, {"id": "c2", "score": 1}]}))
    whole = Reply(json.dumps({"scores": [{"id": "c1", "score": 4}, {"id": "c2", "score": 2}, {"id": "c3", "score": 0}]}))
    with FakeOpenAI([partial]) as server:
        got = asyncio.run(rubric_reward(_judge(tmp_path, server, structured_retries=1), QUESTION, ANSWER,
                                        criteria_from(RUBRICS), mode="batched"))
        told = server.requests[-1]["messages"][-1]["content"]
    assert got.value is None and got.per_criterion["c3"] is None and server.n_requests == 2
    assert "leaves out criteria c3" in told
    with FakeOpenAI([whole]) as server:  # the same cache: the partial answer is not in it
        got = asyncio.run(rubric_reward(_judge(tmp_path, server, structured_retries=1), QUESTION, ANSWER,
                                        criteria_from(RUBRICS), mode="batched"))
    assert server.n_requests == 1 and got.per_criterion == {"c1": 1.0, "c2": 0.5, "c3": 0.0}


def test_a_judge_that_is_down_leaves_the_reward_unscored_not_zero(tmp_path):
    with FakeOpenAI([Reply(status=503)]) as server:
        judge = _judge(tmp_path, server, max_retries=1)
        got = asyncio.run(rubric_reward(judge, QUESTION, ANSWER, criteria_from(RUBRICS)))
    assert got.value is None and got.raw is None and got.unscored == 3
    assert judge.counts()["unscored"] == {"rubric": 3}


def test_no_answer_scores_zero_without_asking_the_judge(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        got = asyncio.run(rubric_reward(_judge(tmp_path, server), QUESTION, None, criteria_from(RUBRICS)))
    assert got.value == 0.0 and server.n_requests == 0


def test_missing_weight_is_an_error_not_a_default():
    with pytest.raises(UserError, match=r"rubrics\[1\] \(id 'c2'\) has no weight"):
        criteria_from([RUBRICS[0], {k: v for k, v in RUBRICS[1].items() if k != "weight"}])


def test_criteria_are_judged_concurrently(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE, hold=3, expected=3) as server:  # answers once all 3 are in flight
        asyncio.run(rubric_reward(_judge(tmp_path, server), QUESTION, ANSWER, criteria_from(RUBRICS)))
    assert server.max_in_flight == 3


@pytest.mark.parametrize(("text", "label"), [
    ("Rating: [[Fully supported]] Analysis: ok", "Fully supported"),
    ("**Rating:** [[ partially   SUPPORTED ]]\nAnalysis: half", "Partially supported"),
    ("Analysis first. Rating: [[No support]]", "No support"),
])
def test_support_labels_are_read_from_the_papers_format(text, label):
    assert Support.from_text(text).label == label


@pytest.mark.parametrize("text", ["Rating: [[Mostly supported]]", "Rating: Fully supported", ""])
def test_labels_outside_the_vocabulary_are_unreadable(text):
    with pytest.raises(ValueError):
        Support.from_text(text)


def test_label_vocabularies_match_the_prompts():
    assert NeedsCitation.from_text("Need Citation: [[Yes]] Analysis: x").label == "Yes"
    assert Relevance.from_text("Rating: [[Irrelevant]]").label == "Irrelevant"
    with pytest.raises(ValueError):
        Relevance.from_text("Rating: [[Relevant but partial]]")


def test_an_unreadable_label_is_reprompted_with_the_format(tmp_path):
    with FakeOpenAI([Reply("Rating: [[Mostly supported]]"), Reply("Rating: [[Partially supported]]")]) as server:
        got = asyncio.run(_judge(tmp_path, server).ask("citation_recall_cited", Support, stage="t", question="q",
                                                       statement="s", cited_snippets="x"))
    assert got.label == "Partially supported" and server.n_requests == 2
    last = server.requests[1]["messages"][-1]["content"]
    assert "not one of" in last and "Rating: [[Fully supported | Partially supported | No support]]" in last
    assert "response_format" not in server.requests[0]  # plain-text verdicts: no JSON schema is forced


def test_citation_reward_per_claim_f1_and_format(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        got = asyncio.run(citation_reward(_judge(tmp_path, server), QUESTION, ANSWER, SNIPPETS))
    by_text = {c.text: c for c in got.claims}
    assert (by_text["The tower stands in Paris."].recall, by_text["The tower stands in Paris."].precision) == (1.0, 1.0)
    assert by_text["The Eiffel Tower is 330 metres tall."].f1 == 1.0
    second = by_text["It was completed in 1889 for the World's Fair."]
    assert second.ids == (S2, BAD) and second.f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    fmt = citation_format_reward(ANSWER, SNIPPETS.keys())
    assert got.f1 == pytest.approx((1 + 1 + 2 / 3) / 3)
    assert got.value == pytest.approx(0.6 * got.f1 + 0.4 * fmt.r_fmt) and got.r_fmt == fmt.r_fmt
    # the unresolved id never reached the judge; only the resolved snippet did
    cited_prompts = [r["messages"][-1]["content"] for r in server.requests if "1889" in r["messages"][-1]["content"]
                     and "<snippet>" in r["messages"][-1]["content"]]
    assert cited_prompts and all(BAD not in p and f"[{S2}]" in p for p in cited_prompts)


def test_a_claim_citing_only_unknown_ids_scores_zero_without_a_judge(tmp_path):
    answer = f'<cite id="{BAD}">The Eiffel Tower is 330 metres tall.</cite>'
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        got = asyncio.run(citation_reward(_judge(tmp_path, server), QUESTION, answer, SNIPPETS))
    assert [c.f1 for c in got.claims] == [0.0] and server.n_requests == 0
    assert got.value == pytest.approx(0.4 * citation_format_reward(answer, SNIPPETS.keys()).r_fmt)


def test_one_failed_citation_judge_leaves_the_citation_reward_unscored(tmp_path):
    with FakeOpenAI(stages={**SCRIPTED_JUDGE, "citation_precision": Reply(status=500)}) as server:
        got = asyncio.run(citation_reward(_judge(tmp_path, server, max_retries=0), QUESTION, ANSWER, SNIPPETS))
    assert got.value is None and got.f1 is None


def test_composite_and_its_parts_from_the_scorer(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        scorer = RewardScorer(cfg, LLMClient(cfg.llm))
        got = asyncio.run(scorer.score(Rollout(EXAMPLE, ROLLOUT)))
    parts = got["composite"]["components"]
    assert parts["rubric"] == pytest.approx(1.25 / 1.5)
    assert parts["format"] == 1.0 and parts["search"] == pytest.approx(1 / 6)
    assert got["composite"]["value"] == pytest.approx(
        0.5 * parts["rubric"] + 0.2 * parts["format"] + 0.2 * parts["citation"] + 0.1 * parts["search"])
    assert server.n_requests == 3 + 2 * 2 + 1  # 3 criteria, recall + precision for 2 cited claims, 1 needs-citation


def test_rescoring_is_free_and_identical_through_the_llm_cache(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        first = asyncio.run(RewardScorer(cfg, LLMClient(cfg.llm)).score(Rollout(EXAMPLE, ROLLOUT)))
        calls = server.n_requests
        again = asyncio.run(RewardScorer(cfg, LLMClient(cfg.llm)).score(Rollout(EXAMPLE, ROLLOUT)))
    assert server.n_requests == calls and again == first


def test_orm_majority_vote_over_three_seeded_samples(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        got = asyncio.run(orm_reward([_judge(tmp_path, server)], QUESTION, "1889", "1889", ["in 1889"]))
    assert got.votes == [1, 0, 1] and got.value == 1.0
    assert sorted(r["seed"] for r in server.requests) == [0, 1, 2]


@pytest.mark.parametrize(("votes", "expected"), [
    ([1, 1, 0], 1.0), ([0, 0, 1], 0.0), ([1, None, None], None), ([1, 0, None], None), ([0, 0, None], 0.0)])
def test_majority_needs_more_than_half_of_all_votes(votes, expected):
    assert majority(votes) == expected


def test_race_score_arithmetic():
    rubrics = RaceRubrics.model_validate({
        "query": "q", "dimension_weight": {"comprehensiveness": 0.5, "insight": 0.25, "instruction_following": 0.25,
                                           "readability": 0},
        "criterions": {d: [{"criterion": f"{d} a", "weight": 1.0}, {"criterion": f"{d} b", "weight": 3.0}]
                       for d in ("comprehensiveness", "insight", "instruction_following", "readability")}})
    judged = RaceJudgement.model_validate({d: [
        {"criterion": f"{d} a", "article_1_score": 8, "article_2_score": 4},
        {"criterion": f"{d} b", "article_1_score": 4, "article_2_score": 4}]
        for d in ("comprehensiveness", "insight", "instruction_following", "readability")})
    got = score_judgement(judged, rubrics)
    # per dimension: target (8*1 + 4*3)/4 = 5, reference 4; readability (weight 0) is left out
    assert got.target["comprehensiveness"] == 5.0 and got.reference["comprehensiveness"] == 4.0
    assert got.dimensions["insight"] == pytest.approx(5 / 9)
    assert got.value == pytest.approx(5 / 9)


def _race_rubric(**weights: float) -> RaceRubrics:
    return RaceRubrics.model_validate({
        "query": "q", "dimension_weight": {d: weights.get(d, 0.0) for d in DIMS},
        "criterions": {"comprehensiveness": [{"criterion": "Coverage of causes", "explanation": "e1", "weight": 3},
                                             {"criterion": "Coverage of effects", "explanation": "e2", "weight": 1}],
                       "insight": [{"criterion": "Depth", "explanation": "e3", "weight": 2},
                                   {"criterion": "Novelty", "explanation": "e4", "weight": 2}],
                       "instruction_following": [], "readability": []}})


DIMS = ("comprehensiveness", "insight", "instruction_following", "readability")


def test_race_weighs_what_the_judge_scored_as_drb_score_calculator_does():
    """DeepResearch Bench's utils/score_calculator.py: each judged item takes the weight of the criterion it names
    (exact, else ignoring case, else by containment), or its dimension's mean weight; a criterion the judge left out
    is not in the sums. The old matcher needed every criterion (or the same count, by position): unscored."""
    rubrics = _race_rubric(comprehensiveness=0.5, insight=0.5)
    judged = RaceJudgement.model_validate({
        "comprehensiveness": [{"criterion": "coverage of causes ", "article_1_score": 8, "article_2_score": 4},
                              {"criterion": "effects", "article_1_score": 2, "article_2_score": 6}],
        "insight": [{"criterion": "Originality", "article_1_score": 6, "article_2_score": 3}],  # Depth left out
        "instruction_following": [], "readability": []})
    got = score_judgement(judged, rubrics)
    # comprehensiveness: target (8·3 + 2·1)/4 = 6.5, reference (4·3 + 6·1)/4 = 4.5; insight: mean weight 2, 6 vs 3
    assert got.target == pytest.approx({"comprehensiveness": 6.5, "insight": 6.0, "overall": 6.25})
    assert got.reference == pytest.approx({"comprehensiveness": 4.5, "insight": 3.0, "overall": 3.75})
    assert got.value == pytest.approx(6.25 / 10) and got.dimensions["insight"] == pytest.approx(2 / 3)


def test_race_is_0_when_both_articles_score_0_and_unscored_when_a_dimension_is_empty():
    """deepresearch_bench_race.py: overall_score = 0 unless target + reference > 0 (the old code said 0.5)."""
    rubrics = _race_rubric(comprehensiveness=0.5, insight=0.5)
    zero = [{"criterion": c, "article_1_score": 0, "article_2_score": 0} for c in ("Depth", "Novelty")]
    got = score_judgement(RaceJudgement.model_validate({
        "comprehensiveness": [{**zero[0], "criterion": "Coverage of causes"}], "insight": zero,
        "instruction_following": [], "readability": []}), rubrics)
    assert got.value == 0.0 and got.dimensions == {"comprehensiveness": 0.0, "insight": 0.0}
    empty = RaceJudgement.model_validate({"comprehensiveness": [], "insight": zero, "instruction_following": [],
                                          "readability": []})
    assert score_judgement(empty, rubrics).value is None  # a judge failure is not a zero


def test_race_judge_sees_each_criterion_and_its_explanation_not_its_weight():
    """deepresearch_bench_race.py format_criteria_list: criterion and explanation only."""
    seen = {}

    class Recorder:
        async def ask(self, prompt, output, **kwargs):
            seen.update(kwargs)
            return None

    asyncio.run(race_score(Recorder(), "q", "target", "reference", _race_rubric(comprehensiveness=1.0)))
    criteria = json.loads(seen["criteria_list"])
    assert criteria["comprehensiveness"] == [{"criterion": "Coverage of causes", "explanation": "e1"},
                                             {"criterion": "Coverage of effects", "explanation": "e2"}]
    assert "weight" not in seen["criteria_list"]


def test_trl_reward_functions_are_async_share_judge_calls_and_pass_none(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        scorer = RewardScorer(cfg, LLMClient(cfg.llm))
        composite, rubric = reward_functions(scorer, ["composite", "rubric"])
        assert asyncio.iscoroutinefunction(composite) and composite.__name__ == "rubricforge_composite"
        logged = []
        columns = {"question": [QUESTION] * 2, "rubrics": [RUBRICS] * 2, "id": ["ex1", "ex1"],
                   "trainer_state": object(), "log_metric": lambda name, value: logged.append((name, value))}
        no_answer = "<think>no time</think>"

        async def both():
            return await asyncio.gather(composite(prompts=[[], []], completions=[ROLLOUT, no_answer], **columns),
                                        rubric(prompts=[[], []], completions=[ROLLOUT, no_answer], **columns))

        comp, rub = asyncio.run(both())
    assert rub[0] == pytest.approx(1.25 / 1.5) and rub[1] == 0.0 and comp[0] is not None
    assert server.n_requests == 8  # each judge request once, although two functions needed the rubric
    assert ("composite/unscored", 0.0) in logged


def test_trl_reward_function_returns_none_for_an_unscorable_sample(tmp_path):
    with FakeOpenAI([Reply(status=503)]) as server:
        cfg = _cfg(tmp_path, server, max_retries=0)
        (rubric,) = reward_functions(RewardScorer(cfg, LLMClient(cfg.llm)), ["rubric"])
        got = asyncio.run(rubric(prompts=[[]], completions=[ROLLOUT], question=[QUESTION], rubrics=[RUBRICS]))
    assert got == [None]


def test_unknown_reward_name_is_a_user_error(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        with pytest.raises(UserError, match="unknown reward 'rubrik'"):
            reward_functions(RewardScorer(cfg, LLMClient(cfg.llm)), ["rubrik"])


def test_search_rl_and_report_rewards_from_the_scorer(tmp_path):
    reference = f'Reference. <cite id="{S1}">The Eiffel Tower is 330 metres tall.</cite>'
    example = {**EXAMPLE, "reference_report": reference}
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        got = asyncio.run(RewardScorer(cfg, LLMClient(cfg.llm)).score(
            Rollout(example, ROLLOUT), ("prm", "orm", "search_rl", "report_citation", "report_format")))
    assert got["prm"]["value"] == pytest.approx(2 / 3)  # Eiffel Tower, World's Fair seen; Gustave Eiffel not
    assert got["orm"]["value"] == 1.0 and got["orm"]["votes"] == [1, 0, 1]
    sr = got["search_rl"]
    assert sr["value"] == pytest.approx(0.6 * sr["tool"] + 0.3 * sr["format"] + 0.1 * (2 / 3))
    assert got["report_citation"]["n_ref"] == 1 and got["report_citation"]["n_gen"] == 3
    assert got["report_format"]["v_tag"] == 0  # the default tag is <answer>


def test_missing_column_names_the_example_and_the_column(tmp_path):
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        with pytest.raises(UserError, match="example 'ex1' has no 'race_rubrics' column"):
            asyncio.run(RewardScorer(cfg, LLMClient(cfg.llm)).component("race", Rollout(EXAMPLE, ROLLOUT)))


def test_race_dimension_without_criteria_is_left_out_and_weights_renormalised():
    rubrics = RaceRubrics.model_validate({
        "query": "q", "dimension_weight": {"comprehensiveness": 0.6, "insight": 0.2, "instruction_following": 0.2,
                                           "readability": 0.0},
        "criterions": {"comprehensiveness": [{"criterion": "x", "weight": 1}], "insight": [],
                       "instruction_following": [{"criterion": "y", "weight": 1}], "readability": []}})
    judged = RaceJudgement.model_validate({
        "comprehensiveness": [{"criterion": "x", "article_1_score": 6, "article_2_score": 2}], "insight": [],
        "instruction_following": [{"criterion": "y", "article_1_score": 2, "article_2_score": 2}], "readability": []})
    got = score_judgement(judged, rubrics)
    assert set(got.dimensions) == {"comprehensiveness", "instruction_following"}
    assert got.target["overall"] == pytest.approx((0.6 * 6 + 0.2 * 2) / 0.8)
    assert got.value == pytest.approx(5.0 / (5.0 + 2.0))


def test_generated_race_rubrics_become_the_shared_record(tmp_path):
    answer = {"dimension_weight": {"comprehensiveness": 2, "insight": 1, "instruction_following": 1, "readability": 0},
              "criterions": {d: [{"criterion": f"{d} c", "explanation": "e", "weight": 0.5}]
                             for d in ("comprehensiveness", "insight", "instruction_following", "readability")}}
    with FakeOpenAI([Reply(json.dumps(answer))]) as server:
        client = LLMClient(_cfg(tmp_path, server).llm)
        got = asyncio.run(generate_race_rubrics(client, "How did X change Y?"))
    assert isinstance(got, RaceRubrics) and got.query == "How did X change Y?"
    assert got.dimension_weight == {"comprehensiveness": 0.5, "insight": 0.25, "instruction_following": 0.25,
                                    "readability": 0.0}


TENSE_REPORT = ("<answer>Sales will reach 5 million units by 2025. Prices fell. Wages rose. Trade slowed. "
                "Output is expected to rise in 2024Q3, the IMF said. Demand is projected to grow by 2030.</answer>")


def test_the_tense_llm_stage_decides_which_stage_one_candidates_are_errors(tmp_path):
    """MindDR App. 8.4: a past-dated prediction is an error only when the judge finds no forecasting
    institution nearby; 2030 has not ended, so it is no candidate and costs no call."""
    def judge(body):
        named = "IMF" in body["messages"][-1]["content"].split("Please determine")[0]  # in the candidate's context
        return Reply(json.dumps({"result": "yes" if named else "no", "detail": "scripted"}))

    with FakeOpenAI(responder=judge) as server:
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, server), "reward": {"tense_today": "2026-11-23"}})
        got = asyncio.run(RewardScorer(cfg, LLMClient(cfg.llm)).score(Rollout(EXAMPLE, TENSE_REPORT), ("tense",)))
    assert got["tense"] == {"value": -1.0, "candidates": 2, "errors": ["will reach 5 million units by 2025"],
                            "unscored": 0}
    assert server.n_requests == 2


def test_tense_penalty_is_zero_without_errors_and_unscored_when_the_judge_fails(tmp_path):
    clean = "<answer>Demand is projected to grow by 2030. It was expected to peak in 2023.</answer>"
    with FakeOpenAI([Reply(status=503)]) as server:
        cfg = load_config(overrides={"llm": litellm_llm_config(tmp_path, server, max_retries=1),
                                     "reward": {"tense_today": "2026-11-23"}})
        scorer = RewardScorer(cfg, LLMClient(cfg.llm))
        none = asyncio.run(scorer.score(Rollout(EXAMPLE, clean), ("tense",)))
        down = asyncio.run(scorer.score(Rollout(EXAMPLE, "<answer>Sales will reach 5 units by 2025.</answer>"),
                                        ("tense",)))
    assert none["tense"]["value"] == 0.0 and none["tense"]["candidates"] == 0
    assert down["tense"]["value"] is None and down["tense"]["unscored"] == 1


def test_report_reward_with_a_kg_exported_race_rubric(tmp_path):
    reference = f'<answer>Reference. <cite id="{S1}">The Eiffel Tower is 330 metres tall.</cite></answer>'
    example = {**EXAMPLE, "race_rubrics": json.dumps(RACE), "reference_report": reference}
    with FakeOpenAI(stages=SCRIPTED_JUDGE) as server:
        cfg = _cfg(tmp_path, server)
        got = asyncio.run(RewardScorer(cfg, LLMClient(cfg.llm)).score(Rollout(example, ROLLOUT), ("report",)))
    race = got["report"]["race"]
    assert race == pytest.approx(0.6)  # 6 / (6 + 4) in every dimension
    # n_gen 3 >= 0.7 * n_ref 1; both cited sentences overlap their snippets: +0.1; well-formed: format 0
    assert got["report"]["citation"] == 0.1 and got["report"]["format"] == 0.0
    assert got["report"]["value"] == pytest.approx(0.6 + 0.1 * 0.1)


def _dimension_judge(body) -> str:
    prompt = body["messages"][-1]["content"]
    dimension = re.search(r"<dimension>([a-z ]+):", prompt).group(1)
    return json.dumps({"rationale": "scripted", "score": {"comprehensiveness": 8, "logical consistency": 6,
                                                           "language quality": 10}[dimension]})


def test_the_pair_score_combines_independent_judges_tense_and_hard_penalties(tmp_path):
    """MindDR §5.4: s(x, y) weighs "multiple independent evaluators" (comprehensiveness, logical consistency,
    language quality, tense accuracy) with "hard penalties for detectable structural issues (missing citations,
    format violations, etc.)"; `train dpo-pairs` ranks by it by default (the old pairs used one reward)."""
    from rubricforge.config import Config

    reference = f'Reference. <cite id="{S1}">The Eiffel Tower is 330 metres tall.</cite>'
    example = {**EXAMPLE, "reference_report": reference}
    untagged = ROLLOUT.replace("<answer>", "").replace("</answer>", "")
    with FakeOpenAI(stages={**SCRIPTED_JUDGE, "alignment": _dimension_judge}) as server:
        scorer = RewardScorer(_cfg(tmp_path, server), LLMClient(_cfg(tmp_path, server).llm))
        clean, broken = (asyncio.run(scorer.score(Rollout(example, r), ("alignment", "report_format")))
                         for r in (ROLLOUT, untagged))
    got = clean["alignment"]
    assert got["dimensions"] == {"comprehensiveness": 8, "logical consistency": 6, "language quality": 10}
    assert got["tense"] == 0.0 and got["violations"] == 0  # no tense error, tag, markdown, cites and count fine
    assert got["value"] == pytest.approx((0.8 + 0.6 + 1.0 + 1.0) / 4)
    assert broken["report_format"]["v_tag"] == 1 and broken["alignment"]["violations"] >= 1
    assert broken["alignment"]["value"] == pytest.approx(0.85 - broken["alignment"]["violations"])  # below any clean
    assert [s for s in server.stages if s == "alignment"] == ["alignment"] * 6  # one evaluator per dimension
    assert Config().train.pair_reward == "alignment"
