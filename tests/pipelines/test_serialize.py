"""Compact tree serialization (Fig. 11 input): structure, limits, breadth-first cutting, valid JSON, on the
hand-built tree of :mod:`support.trees`."""

from __future__ import annotations

import json

from rubricforge.pipelines.tree.serialize import leaf_nodes, ranked_leaves, serialize_tree
from rubricforge.schema import EvidenceTree
from support.trees import node, tiny_tree


def _dump(tree, **limits):
    defaults = {"max_leaves": 24, "statements_per_leaf": 3, "max_chars": 6000}
    return serialize_tree(tree, **{**defaults, **limits})


def test_full_serialization_has_nodes_leaves_and_paths():
    out = _dump(tiny_tree())
    doc = json.loads(out.text)
    assert doc["root"] == "n0"
    assert [n["id"] for n in doc["nodes"]] == ["n0", "n1"]  # internal nodes only, breadth-first
    assert doc["nodes"][0] == {"id": "n0", "parent": None, "depth": 0, "query": "honey bees",
                               "children": ["n1", "n2", "n3"]}
    leaves = {leaf["id"]: leaf for leaf in doc["leaves"]}
    assert set(leaves) == {"n2", "n3", "n4", "n5"}
    assert leaves["n4"]["path"] == ["n0", "n1", "n4"]
    assert leaves["n4"]["evidence"][0] == "Honey bees pollinate about one third of the crops humans eat."
    assert out.cut == {"leaves_total": 4, "leaves_cut": [], "statements_cut": 0, "texts_shortened": 0}
    assert " " not in out.text.split('"query"')[0]  # compact separators


def test_leaves_are_ranked_round_robin_across_root_facets():
    assert [leaf.id for leaf in ranked_leaves(tiny_tree())] == ["n4", "n2", "n3", "n5"]
    out = _dump(tiny_tree(), max_leaves=2)
    assert out.leaf_ids == ["n4", "n2"]  # one per facet before a second from the n1 facet
    assert out.cut["leaves_cut"] == ["n3", "n5"]
    doc = json.loads(out.text)
    n1 = next(n for n in doc["nodes"] if n["id"] == "n1")
    assert n1["children"] == ["n4"]  # children list only shown nodes
    assert next(n for n in doc["nodes"] if n["id"] == "n0")["children"] == ["n1", "n2"]


def test_statement_limit_is_applied_and_counted():
    out = _dump(tiny_tree(), statements_per_leaf=1)
    assert all(len(leaf["evidence"]) == 1 for leaf in json.loads(out.text)["leaves"])
    assert out.cut["statements_cut"] == 3


def test_char_limit_cuts_statements_then_leaves_and_stays_valid_json():
    full = _dump(tiny_tree()).text
    out = _dump(tiny_tree(), max_chars=len(full) - 40)
    assert len(out.text) <= len(full) - 40
    assert out.cut["statements_cut"] >= 1 and out.cut["leaves_cut"] == []  # statements go first
    tight = _dump(tiny_tree(), max_chars=500)
    doc = json.loads(tight.text)
    assert len(tight.text) <= 500 and tight.cut["leaves_cut"]
    assert doc["leaves"][0]["id"] == "n4"  # the best-ranked leaf survives
    assert "over_limit" not in tight.cut


def test_long_texts_are_shortened_when_one_leaf_is_still_too_long():
    tree = tiny_tree()
    tree.nodes["n4"].statements[0].text = "Honey bees pollinate crops. " * 60
    out = _dump(tree, max_leaves=1, max_chars=500)
    doc = json.loads(out.text)
    assert len(out.text) <= 500 and out.cut["texts_shortened"] >= 1
    assert doc["leaves"][0]["evidence"][0].endswith("…")


def test_leaves_without_evidence_rank_last_and_root_only_tree_is_its_own_leaf():
    tree = tiny_tree()
    tree.nodes["n4"].statements = []
    assert [leaf.id for leaf in ranked_leaves(tree)] == ["n2", "n3", "n5", "n4"]
    root_only = EvidenceTree(id="t2", seed_passage_id="p0", seed_title="x", root_id="r",
                             nodes={"r": node("r", "solo", statements=[("A fact.", "p9")])})
    assert [n.id for n in leaf_nodes(root_only)] == ["r"]
    doc = json.loads(_dump(root_only).text)
    assert doc["nodes"] == [] and doc["leaves"][0]["path"] == ["r"]
