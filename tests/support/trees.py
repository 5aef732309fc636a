"""A hand-built evidence tree (:func:`tiny_tree`), five rubrics that pass every rule check on it
(:func:`good_rubrics`) and its question, so the serialization, synthesis, rule, verification and baseline
tests all work on the same tree."""

from __future__ import annotations

from rubricforge.schema import Criterion, EvidenceNode, EvidenceStatement, EvidenceTree

QUESTION = "Why do honey bee colonies matter for agriculture, and what threatens them?"


def node(node_id, query, parent=None, depth=0, children=(), statements=()):
    return EvidenceNode(id=node_id, query=query, parent_id=parent, depth=depth, children=list(children),
                        passage_ids=sorted({p for _, p in statements}),
                        statements=[EvidenceStatement(text=t, passage_id=p) for t, p in statements])


def tiny_tree() -> EvidenceTree:
    """Root n0 with three facets; leaves n4, n5 (under n1), n2, n3."""
    nodes = [
        node("n0", "honey bees", children=["n1", "n2", "n3"]),
        node("n1", "role of honey bees in crop pollination", "n0", 1, ["n4", "n5"]),
        node("n2", "causes of honey bee colony losses", "n0", 1, statements=[
            ("Colony collapse disorder caused US beekeepers to lose 30 to 90 percent of their hives in 2006-2007.", "p3"),
            ("The Varroa destructor mite spreads viruses that weaken honey bee colonies.", "p4")]),
        node("n3", "honey production statistics", "n0", 1, statements=[
            ("A strong honey bee colony can produce 25 to 45 kilograms of surplus honey in a season.", "p5"),
            ("China is the largest producer of honey in the world.", "p6")]),
        node("n4", "crops that depend on honey bee pollination", "n1", 2, statements=[
            ("Honey bees pollinate about one third of the crops humans eat.", "p1"),
            ("Almond orchards in California depend almost entirely on rented honey bee colonies.", "p1")]),
        node("n5", "honey bees compared with wild pollinators", "n1", 2, statements=[
            ("Wild bees pollinate tomatoes more effectively than honey bees through buzz pollination.", "p2")]),
    ]
    return EvidenceTree(id="t1", seed_passage_id="p0", seed_title="Honey bee", topic="Biology", root_id="n0",
                        nodes={n.id: n for n in nodes}, corpus_hash="c0ffee")


def good_rubrics() -> list[Criterion]:
    """Five rubrics that pass every rule check against ``tiny_tree`` with leaves n2, n3, n4, n5 selected."""
    return [
        Criterion(id="R1", type="factual", weight=0.9, source_leaf_ids=["n4"],
                  description="States that honey bees pollinate roughly a third of the crops people eat.",
                  evidence=["Honey bees pollinate about one third of the crops humans eat."]),
        Criterion(id="R2", type="factual", weight=0.8, source_leaf_ids=["n2"],
                  description="Identifies the Varroa mite as a spreader of viruses that weaken colonies.",
                  evidence=["Varroa destructor mite spreads viruses that weaken honey bee colonies"]),
        Criterion(id="R3", type="factual", weight=0.6, source_leaf_ids=["n3", "n5"],
                  description="Gives a quantitative figure for surplus honey produced by one colony per season.",
                  evidence=["A strong colony can produce 25 to 45 kilograms of surplus honey in a season."]),
        Criterion(id="R4", type="logical", weight=0.7, source_leaf_ids=["n4", "n5"],
                  description="Compares managed honey bees with wild pollinators and explains the trade-off."),
        Criterion(id="R5", type="logical", weight=0.5, source_leaf_ids=[],
                  description="Organises the answer into causes, consequences and an evidence-based conclusion."),
    ]
