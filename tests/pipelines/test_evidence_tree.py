"""Stage 1 (evidence trees) over the real small index and real embeddings.

The scheduling tests use :class:`ScriptedModel`, a deterministic stand-in for the generator that
answers each stage from its prompt, so the exact shape of a tree can be asserted (which parent gets
which child under the node budget, which proposals are dropped and why). Trees grown from the real
embedded model's recorded answers are tested with the whole build (``tests/jobs/test_build.py``).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from rubricforge.corpora.tools import ToolBox
from rubricforge.llm import LLMResult
from rubricforge.pipelines.prompting import render
from rubricforge.pipelines.tree.evidence_tree import TreeBuilder, branching_for, grounding_model, proposal_model
from rubricforge.pipelines.tree.seeds import Seed
from rubricforge.schema import EvidenceTree
from support.config import derive


def _quoted(label: str, prompt: str) -> str:
    return re.search(rf'^{label}: "(.*)"$', prompt, re.M).group(1)


@dataclass
class ScriptedModel:
    """Answers like a model would, by stage, from the prompt. ``ungrounded`` / ``atomic`` /
    ``fail_ground`` hold sub-queries, ``fail_decompose`` parent queries to treat specially;
    ``proposals`` overrides what a parent proposes (default: ``limit`` numbered facets)."""

    ungrounded: set[str] = field(default_factory=set)
    atomic: set[str] = field(default_factory=set)
    fail_ground: set[str] = field(default_factory=set)
    fail_decompose: set[str] = field(default_factory=set)
    proposals: dict[str, list[str]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def generate(self, role: str, messages: list[dict[str, str]], *, output: Any, stage: str,
                       max_tokens: int | None = None) -> LLMResult:
        prompt = messages[-1]["content"]
        assert role == "generator"
        if stage == "extract" and "sentence_ids" in output.model_fields:  # sentence selection: the last two shown
            query = json.loads(re.search(r"^Queries: (.*)$", prompt, re.M).group(1))[0]
            self.calls.append((stage, query))
            return self._answer(output, {"sentence_ids": re.findall(r"^\[(S\d+)\]", prompt, re.M)[-2:]})
        if stage == "extract":
            query = json.loads(re.search(r"^Queries: (.*)$", prompt, re.M).group(1))[0]
            title = re.search(r"^Webpage summary: (.*?):", prompt, re.M).group(1)
            self.calls.append((stage, query))
            return self._answer(output, {"statements": [f"{title} is relevant to {query}."]})
        if stage == "decompose":
            parent = _quoted("Parent query", prompt)
            limit = int(re.search(r"Propose up to (\d+) sibling queries", prompt).group(1))
            self.calls.append((stage, parent))
            if parent in self.fail_decompose:
                return LLMResult(ok=False, value=None, text="not json", error="no valid JSON after 3 tries")
            queries = self.proposals.get(parent, [f"{parent} / facet {i}" for i in range(1, limit + 1)])
            return self._answer(output, {"queries": queries})
        assert stage == "ground"
        query = _quoted("Sub-query", prompt)
        self.calls.append((stage, query))
        if query in self.fail_ground:
            return LLMResult(ok=False, value=None, text="", error="no valid JSON after 3 tries")
        ids = [] if query in self.ungrounded else re.findall(r"^\[(P\d+)\]", prompt, re.M)
        answer: dict[str, Any] = {"supporting_ids": ids}
        if "atomic" in output.model_fields:
            answer["atomic"] = query in self.atomic
        return self._answer(output, answer)

    @staticmethod
    def _answer(output: Any, data: dict[str, Any]) -> LLMResult:
        text = json.dumps(data)
        return LLMResult(ok=True, value=output.model_validate_json(text), text=text)


def build(cfg, index, model, seed: Seed, *settings: str) -> EvidenceTree:
    cfg = derive(cfg, *settings)
    with ToolBox.from_config(cfg, index=index) as tools:
        return asyncio.run(TreeBuilder(cfg, model, tools, index.aembed_queries, index.corpus_hash).build("t", seed))


def test_node_budget_is_spread_breadth_first_over_the_root_facets(small_index_cfg, index, seed):
    model = ScriptedModel()
    tree = build(small_index_cfg, index, model, seed, "build.max_nodes=10", "build.redundancy_threshold=1.0")
    nodes = list(tree.nodes.values())
    assert len(nodes) == 10
    depths = [n.depth for n in nodes]
    assert depths == sorted(depths) == [0] + [1] * 6 + [2] * 3  # a level is finished before the next
    held = [p for n in nodes for p in n.passage_ids]
    assert len(held) == len(set(held)) == 10 * small_index_cfg.build.passages_per_node  # each node adds new evidence
    root = tree.nodes["n0"]
    assert len(root.children) == 6  # branching at the root
    # the 3 remaining nodes go to the first 3 root facets, one each (round-robin), not 3 under the first
    facets = [tree.nodes[c] for c in root.children]
    assert [len(f.children) for f in facets] == [1, 1, 1, 0, 0, 0]
    # proposals are requested lazily: facets the budget cannot reach cost no call
    proposed = [q for stage, q in model.calls if stage == "decompose"]
    assert proposed == [seed.query] + [f.query for f in facets[:3]]


def test_round_robin_continues_into_later_rounds_and_respects_depth_aware_branching(small_index_cfg, index, seed):
    model = ScriptedModel()
    tree = build(small_index_cfg, index, model, seed, "build.max_nodes=20", "build.branching=[2,3,1]",
                 "build.redundancy_threshold=1.0", "build.max_depth=3")
    by_depth: dict[int, list] = {}
    for n in tree.nodes.values():
        by_depth.setdefault(n.depth, []).append(n)
    assert [len(by_depth[d]) for d in sorted(by_depth)] == [1, 2, 6, 6]  # 1 + 2 + 2*3 + 6*1 = 15 < 20
    assert all(len(n.children) == branching_for(n.depth, [2, 3, 1]) for n in by_depth[1] + by_depth[2])
    # level 2 was filled round by round: parent A's 1st, B's 1st, A's 2nd, B's 2nd, ...
    assert [n.parent_id for n in by_depth[2]] == [p.id for p in by_depth[1]] * 3
    assert all(not n.children and n.atomic is None for n in by_depth[3])  # max depth: leaves, not gated


def test_nodes_keep_query_passages_statements_parent_and_depth(small_index_cfg, index, seed):
    tree = build(small_index_cfg, index, ScriptedModel(), seed, "build.max_nodes=4", "build.redundancy_threshold=1.0",
                 "build.passages_per_node=2")
    assert tree.root_id == "n0" and tree.seed_passage_id == seed.passage_id and tree.topic == seed.topic
    assert tree.corpus_hash == index.corpus_hash
    restored = EvidenceTree.model_validate_json(tree.model_dump_json())
    assert restored == tree
    for node in tree.nodes.values():
        assert node.query and 1 <= len(node.passage_ids) <= 2
        assert all(index.get(pid) is not None for pid in node.passage_ids)
        assert node.statements and {s.passage_id for s in node.statements} <= set(node.passage_ids)
        if node.parent_id is not None:
            parent = tree.nodes[node.parent_id]
            assert node.id in parent.children and node.depth == parent.depth + 1


def test_ungrounded_and_failed_children_are_dropped_with_reasons(small_index_cfg, index, seed):
    root = seed.query
    model = ScriptedModel(proposals={root: ["history of the subject", "economic impact of the subject",
                                            "famous examples of the subject"]},
                          ungrounded={"economic impact of the subject"}, fail_ground={"famous examples of the subject"})
    tree = build(small_index_cfg, index, model, seed, "build.max_nodes=4", "build.max_depth=1")
    assert [tree.nodes[c].query for c in tree.nodes["n0"].children] == ["history of the subject"]
    reasons = {d["query"]: d for d in tree.dropped}
    assert reasons["economic impact of the subject"]["reason"] == "ungrounded"
    assert "none of the" in reasons["economic impact of the subject"]["detail"]
    assert reasons["famous examples of the subject"]["reason"] == "ground_failed"
    assert "no valid JSON" in reasons["famous examples of the subject"]["detail"]
    assert all(d["parent_id"] == "n0" and d["depth"] == 1 for d in tree.dropped)


def test_redundant_children_are_dropped_against_ancestors_and_siblings(small_index_cfg, index, seed):
    root = seed.query
    model = ScriptedModel(proposals={root: [root + "?", "origins and early history", "origins and early history!",
                                            "modern uses and applications"]})
    tree = build(small_index_cfg, index, model, seed, "build.max_nodes=6", "build.max_depth=1",
                 "build.redundancy_threshold=0.9")
    kept = [tree.nodes[c].query for c in tree.nodes["n0"].children]
    assert kept == ["origins and early history", "modern uses and applications"]
    dropped = {d["query"]: d for d in tree.dropped}
    assert dropped[root + "?"]["reason"] == "redundant" and "ancestor n0" in dropped[root + "?"]["detail"]
    assert dropped["origins and early history!"]["reason"] == "redundant"
    assert "sibling n1" in dropped["origins and early history!"]["detail"]
    # a redundant proposal costs no grounding call
    assert [q for s, q in model.calls if s == "ground"] == kept


def test_atomic_children_become_leaves_and_failed_proposals_are_noted(small_index_cfg, index, seed):
    root = seed.query
    model = ScriptedModel(proposals={root: ["origins and early history", "modern uses and applications"]},
                          atomic={"origins and early history"}, fail_decompose={"modern uses and applications"})
    tree = build(small_index_cfg, index, model, seed, "build.max_nodes=10", "build.max_depth=3")
    first, second = (tree.nodes[c] for c in tree.nodes["n0"].children)
    assert first.atomic is True and first.children == []  # gated: not expanded
    assert second.atomic is False and second.children == []  # its proposal call failed ...
    assert second.notes == ["decompose failed: no valid JSON after 3 tries"]  # ... and that is recorded
    assert [q for s, q in model.calls if s == "decompose"] == [root, "modern uses and applications"]


def test_selected_sentences_are_exact_spans_of_the_stored_passages(small_index_cfg, index, seed):
    tree = build(small_index_cfg, index, ScriptedModel(), seed, "build.extract=sentences", "build.max_nodes=3",
                 "build.passages_per_node=2")
    statements = [s for node in tree.nodes.values() for s in node.statements]
    assert statements and all(s.start is not None and s.end > s.start for s in statements)
    for s in statements:
        assert index.get(s.passage_id).text[s.start:s.end] == s.text
    for node in tree.nodes.values():  # every passage of the node read: its last two sentences (one if it has one)
        assert all(1 <= [s.passage_id for s in node.statements].count(p) <= 2 for p in node.passage_ids)


def test_passage_sentences_leave_out_the_sentence_a_snippet_cuts():
    from rubricforge.pipelines.tree.evidence_tree import passage_sentences
    from rubricforge.schema import Snippet

    text = "Moths are insects. Most are nocturnal (e.g. the U.S. species). Some fly by"
    sentences = passage_sentences(Snippet(id="s1", passage_id="p1", text=text + " \u2026"))
    assert [s.text for s in sentences] == ["Moths are insects.", "Most are nocturnal (e.g. the U.S. species)."]
    assert all(text[s.start:s.end] == s.text for s in sentences)
    assert [s.text for s in passage_sentences(Snippet(id="s1", passage_id="p1", text=text))][-1] == "Some fly by"


def test_output_models_bound_what_constrained_decoding_may_write():
    schema = proposal_model(4).model_json_schema()
    assert schema["properties"]["queries"]["maxItems"] == 4
    assert schema["properties"]["queries"]["items"]["maxLength"] > 0
    ground = grounding_model(("P1", "P2"), True)
    ids = ground.model_json_schema()["properties"]["supporting_ids"]
    assert ids["items"]["enum"] == ["P1", "P2"] and ids["maxItems"] == 2  # a small model cannot repeat an id forever
    with pytest.raises(ValueError):
        ground.model_validate({"supporting_ids": ["P3"], "atomic": False})  # an id that was not shown
    assert "atomic" not in grounding_model(("P1",), False).model_fields


def test_prompts_carry_the_paper_text():
    fig9 = render("decompose", parent_query="q", ancestors="[]", depth=1, max_depth=3, snippets="s", statements="[]",
                  limit=4)
    assert fig9.startswith("You are expanding a research search tree.")
    assert "Ensure at least one query targets comparison/alternatives, one targets risks/failures, and one targets " \
           "quantitative evidence." in fig9
    assert fig9.endswith('Return JSON: {"queries": ["q1", "q2", "q3"]}') and "Propose up to 4 sibling queries" in fig9
    fig10 = render("extract", queries='["q"]', note="n", summary="s")
    assert fig10.startswith("You are an evidence extractor.") and "return 1–3 concise factual statements" in fig10
    assert "<!--" not in fig9 + fig10
