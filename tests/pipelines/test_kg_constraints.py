"""KG graph construction and the three subgraph constraints, on hand-built networkx graphs where each
constraint is violated and must be caught (and a clean graph where it holds). No model, no index
except the reachability test against the real search tool."""

from __future__ import annotations

import random
from collections import Counter

import networkx as nx
import pytest

from rubricforge.config import KGConfig
from rubricforge.pipelines.kg.constraints import (check_determinacy, check_independence, check_necessity,
                                                  check_reachability, check_structure)
from rubricforge.pipelines.kg.difficulty import difficulty
from rubricforge.pipelines.kg.filters import answers_match, drop_category
from rubricforge.pipelines.kg.graph import (EntityResolver, build_graph, canonical_key, graph_stats, load_graph,
                                            save_graph, title_links)
from rubricforge.pipelines.kg.checks import names_in
from rubricforge.pipelines.kg.sampling import _weighted, make_path, plan, sample_paths
from rubricforge.schema import KGEdge, KGPath, Passage


def graph(*hops: tuple[str, str, str], nodes: dict[str, list[str]] | None = None) -> nx.MultiDiGraph:
    """Edges ``(head, tail, passage_id)``; every node an article with its own passage ``p-<node>``."""
    names = {n for h, t, _ in hops for n in (h, t)} | set(nodes or {})
    attrs = {n: {"name": n.upper(), "aliases": [n.upper()], "passage_ids": (nodes or {}).get(n, [f"p-{n}"]),
                 "description": "", "kind": "article"} for n in names}
    return build_graph(attrs, [KGEdge(head=h, relation="is the part of", tail=t, passage_id=p, evidence=f"{h} {t}")
                               for h, t, p in hops])


CHAIN = [("a", "b", "p-a"), ("b", "c", "p-b"), ("c", "d", "p-c")]


def test_a_clean_chain_passes_structure_and_necessity():
    g = graph(*CHAIN)
    path = make_path(g, "kgp-0", [["a", "b", "c", "d"]])
    assert path.hops == 3 and path.answer == "d" and path.intermediates() == ["b", "c"]
    assert check_structure(g, path) == [] and check_necessity(g, path) == [] and check_independence(g, path) == []


@pytest.mark.parametrize("shortcut", [("b", "d"), ("d", "b"), ("a", "c"), ("a", "d")])
def test_necessity_catches_a_shortcut_edge_in_either_direction(shortcut):
    g = graph(*CHAIN, (*shortcut, "p-x"))
    path = make_path(g, "kgp-0", [["a", "b", "c", "d"]])
    failures = check_necessity(g, path)
    assert any(f.startswith("shortcut edge") and set(shortcut) <= set(f.split()[2].split("–")) for f in failures)


def test_necessity_catches_a_passage_that_names_an_intermediate_and_the_answer():
    # no edge b–d, but passage p-e states e->b and e->d: one retrieval gives both ends
    g = graph(*CHAIN, ("e", "b", "p-e"), ("e", "d", "p-e"))
    path = make_path(g, "kgp-0", [["a", "b", "c", "d"]])
    assert check_necessity(g, path) == ["shortcut passage p-e mentions both b and d"]


def test_necessity_catches_one_passage_stating_two_consecutive_hops():
    g = graph(("a", "b", "p-a"), ("b", "c", "p-a"))  # both hops in passage p-a
    assert check_necessity(g, make_path(g, "kgp-0", [["a", "b", "c"]])) == ["shortcut passage p-a mentions both a and c"]


def test_necessity_refuses_an_intermediate_a_reader_names_from_its_noun():
    """Seed 0 retained "Tibet is the highest region on a planet. Which trench is the deepest oceanic trench on
    that planet?": the first hop states nothing a reader needs."""
    g = graph(("tibet", "earth", "p-t"), ("trench", "earth", "p-m"))
    g.nodes["earth"]["name"] = "Earth"
    assert check_necessity(g, make_path(g, "kgp-0", [["tibet", "earth", "trench"]])) == [
        "Earth is named by its noun alone: the hop into it states no condition"]
    assert check_necessity(g, make_path(g, "kgp-0", [["tibet", "earth"], ["trench", "earth"]])) == []  # the answer


BRANCHES = [("a", "b", "p-a"), ("b", "z", "p-b"), ("c", "d", "p-c"), ("d", "z", "p-d")]


def test_independent_branches_pass():
    g = graph(*BRANCHES)
    path = make_path(g, "kgp-0", [["a", "b", "z"], ["c", "d", "z"]])
    assert path.shape == "branch" and path.hops == 4 and path.starts() == ["a", "c"]
    assert check_independence(g, path) == [] and check_necessity(g, path) == [] and check_structure(g, path) == []


def test_independence_catches_a_cross_branch_edge():
    g = graph(*BRANCHES, ("b", "d", "p-x"))
    failures = check_independence(g, make_path(g, "kgp-0", [["a", "b", "z"], ["c", "d", "z"]]))
    assert "cross-branch edge b–d" in failures


def test_independence_catches_a_cross_branch_passage():
    g = graph(*BRANCHES, ("q", "a", "p-q"), ("q", "c", "p-q"))
    failures = check_independence(g, make_path(g, "kgp-0", [["a", "b", "z"], ["c", "d", "z"]]))
    assert failures == ["cross-branch passage p-q mentions both a and c"]


def test_independence_catches_a_shared_intermediate():
    g = graph(("a", "m", "p-a"), ("m", "z", "p-m"), ("c", "m", "p-c"))
    failures = check_independence(g, make_path(g, "kgp-0", [["a", "m", "z"], ["c", "m", "z"]]))
    assert "branches 0 and 1 share m" in failures


def test_structure_catches_an_edge_the_graph_does_not_have():
    g = graph(*CHAIN)
    path = make_path(g, "kgp-0", [["a", "b", "c", "d"]])
    forged = path.model_copy(update={"edges": [path.edges[0], path.edges[1],
                                               path.edges[2].model_copy(update={"passage_id": "p-z"})]})
    assert check_structure(g, forged) == ["edge c->d (is the part of, p-z) is not in the graph"]
    swapped = path.model_copy(update={"branches": [["a", "c", "b", "d"]]})
    assert any("is not the hop" in f for f in check_structure(g, swapped))


def test_determinacy_reads_the_relation_along_or_against_its_direction():
    def path(relation: str, branch: list[str]) -> KGPath:
        e = KGEdge(head="lyon", relation=relation, tail="france", passage_id="p1")
        return KGPath(id="x", shape="chain", branches=[branch], edges=[e], answer=branch[-1], hops=1)

    assert check_determinacy(path("is a city in", ["lyon", "france"])) == []  # Lyon -> its country
    assert check_determinacy(path("is the capital of", ["france", "lyon"])) == []  # France -> its capital
    assert check_determinacy(path("is a city in", ["france", "lyon"])) == [
        "hop france->lyon ('is a city in' read against its direction) does not determine lyon"]  # many cities
    assert check_determinacy(path("is bordered by", ["lyon", "france"]))  # one of several neighbours
    assert check_determinacy(path("was born in", ["lyon", "france"])) == []


def test_reachability_catches_a_hop_whose_passage_search_does_not_return():
    g = graph(*CHAIN)
    path = make_path(g, "kgp-0", [["a", "b", "c", "d"]])
    results = {"A B": ["p-a"], "B C": ["p-x", "p-y", "p-b"], "C D": ["p-c"]}
    failures = check_reachability(path, lambda q, k: results[q], k=2)
    assert failures == ["hop b->c: passage p-b is not in the top 2 for 'B C'"]
    assert check_reachability(path, lambda q, k: results[q], k=3) == []


def test_reachability_with_the_real_search_tool(small_index_cfg):
    from rubricforge.corpora.tools import ToolBox

    with ToolBox.from_config(small_index_cfg) as tools:
        passages = {p.title: p for p in tools.retrievers["search"].index.iter_passages()}
        resolver = EntityResolver()
        for p in passages.values():
            resolver.add_article(p)
        edges = title_links(passages.values(), resolver)
        g = build_graph(resolver.nodes, edges)
        search = lambda q, k: [s.passage_id for s in tools.search_snippets(q, k)]  # noqa: E731

        def one_hop(e: KGEdge) -> KGPath:  # any edge: reachability is the search tool's, whatever the hop's source
            return KGPath(id="x", shape="chain", branches=[[e.head, e.tail]], edges=[e], answer=e.tail, hops=1,
                          names={n: g.nodes[n]["name"] for n in (e.head, e.tail)})

        reachable = [e for e in edges[:40] if not check_reachability(one_hop(e), search, 5)]
        assert reachable, "some title links of the small corpus are retrievable by their two names"
        e = reachable[0]
        wrong = one_hop(e)
        wrong.edges[0] = wrong.edges[0].model_copy(update={"passage_id": "wiki-99999"})
        assert check_reachability(wrong, search, 5)[0].startswith(f"hop {e.head}->{e.tail}: passage wiki-99999")


def test_sampling_keeps_only_subgraphs_that_pass_and_counts_rejections():
    # a ladder with one shortcut: some walks hit it and must be rejected for necessity
    hops = [(f"n{i}", f"n{i + 1}", f"p-n{i}") for i in range(8)] + [("n2", "n4", "p-x")]
    g = graph(*hops)
    cfg = KGConfig(n_paths=3, hops=[2], branch_every=0, sample_attempts=200, seed=1)
    sampled = sample_paths(g, cfg, lambda q, k: [f"p-{q.split()[0].lower()}", f"p-{q.split()[1].lower()}"])
    assert len(sampled.paths) == 3 and sampled.rejected["necessity"] >= 1
    for p in sampled.paths:
        assert check_necessity(g, p) == [] and check_structure(g, p) == [] and p.hops == 2


def test_sampling_rejects_everything_when_search_never_finds_the_passages():
    g = graph(*CHAIN)
    sampled = sample_paths(g, KGConfig(n_paths=1, hops=[1], sample_attempts=30), lambda q, k: [])
    assert sampled.paths == [] and sampled.rejected["reachability"] > 0 and "reachability" in sampled.examples


def test_plan_mixes_chains_of_the_configured_hops_and_branches():
    shapes = plan(KGConfig(n_paths=6, hops=[1, 5, 3], branch_every=3))
    assert shapes == [("chain", [1]), ("chain", [5]), ("branch", [2, 1]), ("chain", [1]), ("chain", [5]),
                      ("branch", [2, 1])]


def test_hub_weighting_prefers_rare_neighbours():
    und = nx.Graph([("hub", f"x{i}") for i in range(50)] + [("rare", "y")])
    picks = Counter(_weighted(random.Random(i), und, ["hub", "rare"], 1.0) for i in range(2000))
    assert picks["rare"] > 10 * picks["hub"]
    flat = Counter(_weighted(random.Random(i), und, ["hub", "rare"], 0.0) for i in range(2000))
    assert 0.4 < flat["rare"] / 2000 < 0.6


def test_canonicalisation_merges_aliases_into_article_nodes():
    assert canonical_key("The Roman Empire's") == canonical_key("roman empire") == "roman empire"
    assert canonical_key("Mercury (planet)") == "mercury"
    r = EntityResolver()
    r.add_article(Passage(id="w1", title="Roman Empire", text="...", metadata={"description": "state"}))
    assert r.resolve("the Roman Empire") == r.resolve("Roman Empire’s") == "roman_empire"
    assert r.nodes["roman_empire"]["aliases"] == ["Roman Empire", "the Roman Empire", "Roman Empire’s"]
    assert r.nodes["roman_empire"]["kind"] == "article" and r.nodes["roman_empire"]["description"] == "state"
    assert r.resolve("  ") is None


def test_title_links_find_whole_word_mentions_with_their_sentence_longest_first(tmp_path):
    ps = [Passage(id="w1", title="New York City", text="A city. It is larger than Boston and New York State."),
          Passage(id="w2", title="Boston", text="Boston is old. Not Bostonian, but New York City is bigger."),
          Passage(id="w3", title="New York State", text="A state."),
          Passage(id="w4", title="Art", text="Short titles are ignored: New York City Art.")]
    r = EntityResolver()
    for p in ps:
        r.add_article(p)
    edges = title_links(ps, r, min_title_chars=4)
    got = {(e.head, e.tail, e.passage_id) for e in edges}
    assert got == {("new_york_city", "boston", "w1"), ("new_york_city", "new_york_state", "w1"),
                   ("boston", "new_york_city", "w2"), ("art", "new_york_city", "w4")}
    e = next(e for e in edges if e.head == "boston")
    assert e.evidence == "Not Bostonian, but New York City is bigger." and e.source == "link"
    g = build_graph(r.nodes, edges)
    stats = save_graph(g, tmp_path / "graph.json")
    assert stats == graph_stats(load_graph(tmp_path / "graph.json"))
    assert stats["nodes"] == 4 and stats["edges"] == 4 and stats["components"] == 1
    assert (tmp_path / "graph_stats.json").exists()


def test_answer_matching_leak_check_drop_categories_and_difficulty():
    assert answers_match("It is the Roman Empire.", ["Roman Empire"]) and not answers_match("Rome", ["Roman Empire"])
    assert answers_match("K2", ["K2"]) and not answers_match("a", ["Kashmir region"])  # short: equality only
    assert names_in("Which river flows past the city?", ["River", "Paris"]) == ["River"]
    assert names_in("Parisian food", ["Paris"]) == []
    assert drop_category("answer not unique: two rivers") == "answer not unique"
    assert drop_category("question names the answer (Paris)") == "question names the answer"
    degrees = list(range(100))  # degree d has rarity (99 - d) / 100
    assert difficulty(1, [50, 50], degrees, True)[0] == "easy"
    assert difficulty(3, [50, 50], degrees, True)[0] == "medium"
    assert difficulty(3, [95, 95], degrees, True)[0] == "easy"  # common entities lower the level
    assert difficulty(2, [1, 2], degrees, True)[0] == "medium"  # rare entities raise it
    assert difficulty(2, [50, 50], degrees, False)[0] == "medium"  # so does a single search missing the answer
    label, factors = difficulty(4, [10, 20], degrees, False)
    assert label == "hard" and factors["answer_passage_retrieved"] is False and factors["hop_level"] == "hard"
    assert factors["entity_rarity"] == pytest.approx(0.84)
