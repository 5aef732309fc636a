"""Quality gates: decontamination against DeepResearch Bench's shipped prompts (a planted near-copy is dropped
with the matching item), semantic dedup within a dataset and against a previous one, learnability left unscored by a failed judge
(the gate stage of the job and the card: tests/jobs/test_gates.py)."""

from __future__ import annotations

import json

import pytest

from rubricforge.config import Config
from rubricforge.pipelines.quality import apply_gates
from rubricforge.pipelines.quality.decontam import benchmark_items, ngrams

DRB_51 = ("From 2020 to 2050, how many elderly people will there be in Japan? What is their consumption potential "
          "across various aspects such as clothing, food, housing, and transportation? Based on population "
          "projections, elderly consumer willingness, and potential changes in their consumption habits, please "
          "produce a market size analysis report for the elderly demographic.")
# A near-copy: new opening and ending, the middle kept word for word
NEAR_COPY = ("For the years 2020 to 2050, estimate how many elderly people will there be in Japan and what is their "
             "consumption potential across various aspects such as clothing, food, housing, and transportation?")
# A paraphrase sharing no 13-word run with DRB task 51
PARAPHRASE = ("Between 2020 and 2050, how many elderly people will Japan have, and what is their consumption potential "
              "in clothing, food, housing and transport? Using population projections, the willingness of older "
              "consumers and likely changes in their consumption habits, write a market size analysis for the "
              "elderly demographic.")
CLEAN = "How did the Roman road network shape trade in the provinces?"


def cfg(**quality) -> Config:
    return Config(quality={"embedding_threshold": None, "dedup_threshold": None, **quality})


def test_drb_prompts_ship_with_the_package():
    items = benchmark_items(["drb"])
    assert len(items) == 100 and {i.benchmark for i in items} == {"drb"}
    assert next(i for i in items if i.id == "51").prompt == DRB_51


def test_a_planted_near_copy_of_a_drb_query_is_dropped_by_13_grams():
    report = apply_gates([("q1", NEAR_COPY), ("q2", CLEAN), ("q3", "收集一下：" + benchmark_items(["drb"])[0].prompt)],
                         cfg())
    assert set(report.dropped) == {"q1", "q3"}
    assert report.dropped["q1"]["benchmark"] == "drb" and report.dropped["q1"]["item_id"] == "51"
    assert report.dropped["q1"]["method"] == "13-gram" and report.dropped["q1"]["matched"].startswith("From 2020")
    assert report.dropped["q3"]["item_id"] == "1"  # Chinese: one word per character
    assert report.summary["decontamination"] == {
        "benchmarks": {"drb": 100}, "ngram": 13, "embedding_threshold": None, "checked": 3, "dropped": 2,
        "by_benchmark": {"drb": 2}, "by_method": {"13-gram": 2}}
    assert not ngrams(PARAPHRASE, 13) & ngrams(DRB_51, 13)
    assert apply_gates([("p", PARAPHRASE)], cfg()).dropped == {}  # n-grams alone miss a paraphrase


def test_user_benchmark_files_are_checked(tmp_path):
    bench = tmp_path / "researchqa_test.json"
    bench.write_text(json.dumps([{"id": "rqa-9", "query": CLEAN, "rubric": []}]))
    report = apply_gates([("q", CLEAN)], cfg(benchmarks=[], benchmark_files=[str(bench)], ngram=5))
    assert report.dropped["q"]["benchmark"] == "researchqa_test" and report.dropped["q"]["item_id"] == "rqa-9"


def test_embedding_similarity_and_dedup_with_the_real_model(tmp_path):
    previous = tmp_path / "previous.jsonl"
    previous.write_text(json.dumps({"id": "old", "question": "What caused the fall of the Western Roman Empire?"}) + "\n")
    items = [("a", PARAPHRASE), ("b", CLEAN), ("c", "How did the Roman road network shape trade in the provinces ?"),
             ("d", "What caused the fall of the Western Roman Empire?"), ("e", "Why do cats purr?")]
    report = apply_gates(items, Config(quality={"previous_datasets": [str(previous)]}))
    assert report.dropped["a"]["gate"] == "decontamination" and report.dropped["a"]["method"] == "embedding"
    assert report.dropped["a"]["item_id"] == "51" and report.dropped["a"]["score"] >= 0.9
    assert report.dropped["c"] == {"gate": "dedup", "method": "within", "duplicate_of": "b",
                                   "score": pytest.approx(report.dropped["c"]["score"])}
    assert report.dropped["c"]["score"] >= 0.95
    assert report.dropped["d"]["method"] == "previous"
    assert set(report.dropped) == {"a", "c", "d"}
    assert report.summary["dedup"] == {"threshold": 0.95, "checked": 4, "previous_datasets": 1,
                                       "previous_questions": 1, "within": 1, "previous": 1}


def test_a_judge_that_fails_leaves_learnability_unscored_never_flagged(tmp_path):
    import asyncio

    from rubricforge.testing import FakeOpenAI, Reply
    from support.llm_fakes import litellm_llm_config
    from rubricforge.llm import LLMClient
    from rubricforge.rewards.learnability import learnability

    rubrics = [{"id": "c1", "type": "logical", "description": "Explains it", "weight": 1.0}]

    with FakeOpenAI(stages={"closed_book_answer": "An answer.", "rubric*": Reply(status=503, error="down")}) as server:
        cfg = Config(llm=litellm_llm_config(tmp_path, server, max_retries=0, structured_retries=0))

        async def scores():
            client = LLMClient(cfg.llm)
            try:
                return await learnability([("x", "Why is the sky blue?", rubrics)], cfg, client)
            finally:
                await client.aclose()

        got = asyncio.run(scores())
    assert got.scores == {"x": None} and got.too_easy == []
    assert got.summary(0.8, False)["unscored"] == 1
