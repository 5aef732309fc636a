"""§4.4 ablation baselines: closed-book rubrics and search-based rubrics for the tree's question."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricforge.config import Config
from rubricforge.pipelines.tree.rules import check_rules
from rubricforge.rubric_gen.baselines import BaselineOutput, baseline_candidate
from rubricforge.rubric_gen.prompting import PROMPTS
from support.replay_client import replay_client
from support.trees import QUESTION, good_rubrics, tiny_tree


def _rubrics(**per_id) -> list[dict]:
    out = []
    for r in good_rubrics():
        d = r.model_dump(include={"id", "type", "description", "weight", "source_leaf_ids", "evidence"})
        d.update(per_id.get(r.id, {}))
        out.append(d)
    return out


def _messages(prompt: str, sample: dict) -> list[dict]:
    return [{"role": "system", "content": PROMPTS.render(prompt)},
            {"role": "user", "content": json.dumps(sample, ensure_ascii=False, separators=(",", ":"))}]


def test_closed_book_rubrics_come_from_the_question_alone(tmp_path):
    cfg = Config()
    answer = {"rubrics": _rubrics(**{rid: {"source_leaf_ids": [], "evidence": []} for rid in ("R1", "R2", "R3", "R4")})}
    client = replay_client(tmp_path, [("generator", _messages("baseline_closed_book", {"question": QUESTION}),
                                       BaselineOutput, "baseline-closed-book", answer)])
    cand = asyncio.run(baseline_candidate(tiny_tree(), "closed-book", QUESTION, client, None, cfg))
    assert cand.id == "t1--closed-book" and cand.rubric_source == "closed-book"
    assert cand.question == QUESTION and cand.selected_leaf_ids == [] and cand.selection_trace is None
    assert check_rules(cand, tiny_tree(), cfg) == []
    assert all(r.passage_ids == [] for r in cand.rubrics)


def test_unknown_source_is_refused():
    with pytest.raises(ValueError):
        asyncio.run(baseline_candidate(tiny_tree(), "tree", QUESTION, None, None, Config()))


@pytest.mark.slow
def test_search_rubrics_are_grounded_in_passages_retrieved_with_the_question(tmp_path, small_index_cfg):
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.pipelines.tree.rules import split_sentences

    cfg = small_index_cfg
    with ToolBox.from_config(cfg) as tools:
        shown = tools.search_snippets([QUESTION], k=cfg.tools.top_k)
        assert len(shown) == cfg.tools.top_k
        first, second = shown[0], shown[1]
        quote = split_sentences(first.text, first.passage_id)[0].text
        answer = {"rubrics": _rubrics(
            R1={"source_leaf_ids": [first.id], "evidence": [quote]},
            R2={"source_leaf_ids": [second.id], "evidence": ["The Zorblax treaty of 3021 fixed lunar honey quotas."]},
            R3={"source_leaf_ids": ["s-not-retrieved"]})}
        sample = {"question": QUESTION, "passages": [{"id": s.id, "title": s.title, "text": s.text} for s in shown]}
        client = replay_client(tmp_path, [("generator", _messages("baseline_search", sample), BaselineOutput,
                                           "baseline-search", answer)])
        cand = asyncio.run(baseline_candidate(tiny_tree(), "search", QUESTION, client, tools, cfg))
    assert cand.id == "t1--search" and cand.rubric_source == "search"
    assert cand.selected_leaf_ids == [s.id for s in shown]
    assert [i["passage_id"] for i in cand.selection_trace["retrieved"]] == [s.passage_id for s in shown]
    failures = check_rules(cand, tiny_tree(), cfg)
    assert not any(f.startswith("R1") for f in failures) and cand.rubrics[0].passage_ids == [first.passage_id]
    assert any(f.startswith("R2: evidence 'The Zorblax treaty") for f in failures)
    assert "R3: source leaf 's-not-retrieved' is not among the selected leaves" in failures
