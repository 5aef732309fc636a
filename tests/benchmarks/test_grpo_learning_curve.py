"""The content task of the GRPO learning curve (benchmarks/grpo_learning_curve.py): masked-title questions whose
answer the ``answer_f1`` reward checks, and the held-out split the gold evaluation reads."""

from __future__ import annotations

import json

from rubricforge.evaluation.exact import tokens
from support.paths import load_script


def _benchmark():
    return load_script("benchmarks/grpo_learning_curve.py")


def test_the_title_and_its_words_are_masked_in_the_first_sentence():
    masked = _benchmark().masked
    text = "Abraham Lincoln was the 16th president of the United States. Lincoln was born in Kentucky."
    assert masked("Abraham Lincoln", text) == ("___ was the 16th president of the United States.", "Abraham Lincoln")
    # a trailing parenthesis is not part of the answer; a word of the title alone is masked too
    assert masked("Mercury (planet)", "Mercury is the smallest planet; mercury orbits the Sun closest of all.") == (
        "___ is the smallest planet; ___ orbits the Sun closest of all.", "Mercury")
    assert masked("Tomato", "A plant whose fruit is an edible berry eaten as a vegetable.") is None  # no title: no blank
    assert masked("Hat", "A hat is worn.") is None  # too short to say anything


def test_content_questions_hold_out_other_articles_and_offer_the_answer_among_other_titles(tmp_path):
    bench = _benchmark()
    path = bench.content_questions(tmp_path / "q.jsonl", n=12, held=6, seed=0)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["split"] for r in rows] == ["test"] * 6 + ["train"] * 12
    assert len({r["id"] for r in rows}) == 18  # 18 articles: no held-out article is trained on
    for r in rows:
        sentence = r["question"].split('"')[1]
        options = r["question"].split("Options: ")[1].split(". Reply")[0].split("; ")
        assert "___" in sentence and r["answer"] in options and len(set(options)) == 4
        assert not {w for w in tokens(r["answer"]) if len(w) >= 4} & set(tokens(sentence)), r  # the answer is masked
    assert bench.content_questions(tmp_path / "again.jsonl", n=12, held=6, seed=0).read_text() == path.read_text()


def test_the_held_out_comparison_pairs_each_evaluation_with_the_control_or_step_0():
    bench = _benchmark()

    def evaluation(step, em):
        return {"step": step, "per_task": [{"id": f"q{k}", "exact.em": v, "exact.f1": v} for k, v in enumerate(em)],
                "answers": [str(v) for v in em], "probes": {"refusal": 1 - sum(em) / len(em)}}

    trained = [evaluation(0, [0, 0, 1, 1]), evaluation(10, [1, 1, 1, 1]), evaluation(20, [1, 1, 1, 0])]
    lines = bench.gold_summary({"1e-05": trained, "0": [evaluation(20, [0, 0, 1, 1])]}, {"q0": "Spring"})
    rows = {line.split(" | ")[0]: line for line in lines if line.startswith("| 10 |") or line.startswith("| 20 |")}
    # step 10: no control evaluation there, so the step-0 answers stand in for it (lr 0 moves no weight)
    assert "| 10 | step 0 | +0.500" in rows["| 10"] and "2/2/0" in rows["| 10"]
    assert "| 20 | control run | +0.250" in rows["| 20"]
    assert "- q0 (gold: Spring): \"0\" → \"1\"" in lines
