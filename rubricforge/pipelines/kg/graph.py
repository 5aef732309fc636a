"""Graph construction (MindDR §4.1): entities and typed relations over the corpus, in networkx.

* **Corpus link structure** (:func:`title_links`, no LLM): an article whose text mentions another
  article's title (whole words, case-sensitive, titles of at least ``min_title_chars``) gets a
  ``mentions`` edge to it, kept with the passage id and the sentence that mentions it.
* **LLM relations** (:mod:`.extract`): typed ``head --relation--> tail`` triples from a slice of
  passages, each kept with its passage id.
* **Canonicalisation** (:class:`EntityResolver`): surface forms that share a canonical key (case,
  accents, punctuation, a leading article, a trailing parenthetical, a possessive) are one node; an
  extracted entity whose key is an article title's key *is* that article. Every surface form seen is
  kept in the node's ``aliases``.

The graph is a ``MultiDiGraph``; node attributes ``name``, ``aliases``, ``passage_ids`` (the node's own
article passages), ``description``, ``kind`` (article | extracted); edge attributes those of
:class:`~rubricforge.schema.KGEdge`. It is saved as node-link JSON with its statistics.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.extras import needs
from rubricforge.rundir import atomic_write_json
from rubricforge.schema import KGEdge, Passage
from rubricforge.text import clip, sentence_spans

if TYPE_CHECKING:
    import networkx as nx

_WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")
MAX_EVIDENCE_CHARS = 300
_ENDS = {"source": "from", "target": "to"}  # node-link endpoint keys ("source" is an edge attribute here)


def canonical_key(name: str) -> str:
    """``"The Roman Empire's"`` -> ``"roman empire"``: the key under which surface forms merge."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = re.sub(r"\s*\([^)]*\)\s*$", "", text)  # "Mercury (planet)" -> "mercury"
    text = re.sub(r"['’]s\b", "", text)
    text = re.sub(r"[^\w\s]", " ", text)
    text = re.sub(r"^(the|a|an)\s+", "", text.strip())
    return " ".join(text.split())


def node_id(name: str) -> str:
    return canonical_key(name).replace(" ", "_")


class EntityResolver:
    """Maps surface forms to node ids, merging aliases; seeded with the corpus's article titles."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}

    def add_article(self, passage: Passage) -> str:
        nid = node_id(passage.title)
        node = self._node(nid, passage.title, "article")
        if node["kind"] != "article":  # an extracted entity seen first: the article takes over its name
            node.update(name=passage.title, kind="article")
        node["passage_ids"].append(passage.id)
        if not node["description"]:
            node["description"] = str(passage.metadata.get("description") or "")
        self._alias(node, passage.title)
        return nid

    def resolve(self, surface: str) -> str | None:
        """The node id for an extracted entity name (a new node when nothing matches); None if empty."""
        surface = " ".join(surface.split())
        nid = node_id(surface)
        if not nid:
            return None
        self._alias(self._node(nid, surface, "extracted"), surface)
        return nid

    def _node(self, nid: str, name: str, kind: str) -> dict[str, Any]:
        return self.nodes.setdefault(nid, {"name": name, "aliases": [], "passage_ids": [], "description": "",
                                           "kind": kind})

    @staticmethod
    def _alias(node: dict[str, Any], surface: str) -> None:
        if surface not in node["aliases"]:
            node["aliases"].append(surface)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (:func:`rubricforge.text.sentence_spans`, the tree's splitter)."""
    return [text[a:b] for a, b in sentence_spans(text)]


def title_links(passages: Iterable[Passage], resolver: EntityResolver, min_title_chars: int = 4) -> list[KGEdge]:
    """``mentions`` edges from each passage's article to every other article title its text contains."""
    passages = list(passages)
    titles: dict[tuple[str, ...], str] = {}
    for p in passages:
        if p.title and len(p.title) >= min_title_chars:
            titles.setdefault(tuple(_WORD.findall(p.title)), node_id(p.title))
    by_first: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for title_toks in titles:
        if title_toks:
            by_first[title_toks[0]].append(title_toks)
    for firsts in by_first.values():
        firsts.sort(key=len, reverse=True)  # longest title first: "New York City" before "New York"
    edges: list[KGEdge] = []
    for p in passages:
        head = node_id(p.title)
        seen: set[str] = set()
        for sentence in sentences(p.text):
            toks = _WORD.findall(sentence)
            i = 0
            while i < len(toks):
                match = next((t for t in by_first.get(toks[i], ()) if tuple(toks[i:i + len(t)]) == t), None)
                if match is None:
                    i += 1
                    continue
                tail = titles[match]
                if tail != head and tail not in seen:
                    seen.add(tail)
                    edges.append(KGEdge(head=head, relation="mentions", tail=tail, passage_id=p.id,
                                        evidence=clip(sentence, MAX_EVIDENCE_CHARS), source="link"))
                i += len(match)
    return edges


def build_graph(nodes: dict[str, dict[str, Any]], edges: Iterable[KGEdge]) -> nx.MultiDiGraph:
    with needs("data"):
        import networkx as nx

    g = nx.MultiDiGraph()
    for nid, attrs in nodes.items():
        g.add_node(nid, **attrs)
    for e in edges:
        if e.head != e.tail and e.head in g and e.tail in g:
            g.add_edge(e.head, e.tail, **e.model_dump())
    return g


def graph_stats(g: nx.MultiDiGraph) -> dict[str, Any]:
    """Nodes, edges (by source and relation), weakly connected components, degree distribution."""
    with needs("data"):
        import networkx as nx

    degrees = [d for _, d in nx.Graph(g).degree()]
    components = sorted((len(c) for c in nx.weakly_connected_components(g)), reverse=True)
    sources = Counter(d["source"] for _, _, d in g.edges(data=True))
    relations = Counter(d["relation"] for _, _, d in g.edges(data=True))
    bins = Counter(_degree_bin(d) for d in degrees)
    return {
        "nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "edges_by_source": dict(sources),
        "top_relations": dict(relations.most_common(10)),
        "nodes_by_kind": dict(Counter(k for _, k in g.nodes(data="kind"))),
        "components": len(components), "largest_component": components[0] if components else 0,
        "isolated_nodes": sum(1 for d in degrees if d == 0),
        "degree": {"mean": round(sum(degrees) / len(degrees), 2) if degrees else 0.0,
                   "max": max(degrees, default=0),
                   "histogram": {b: bins[b] for b in ("0", "1", "2-3", "4-7", "8-15", "16-63", "64+") if bins[b]}},
    }


def _degree_bin(d: int) -> str:
    for hi, label in ((0, "0"), (1, "1"), (3, "2-3"), (7, "4-7"), (15, "8-15"), (63, "16-63")):
        if d <= hi:
            return label
    return "64+"


def save_graph(g: nx.MultiDiGraph, path: Path) -> dict[str, Any]:
    """Write the graph as node-link JSON and ``<stem>_stats.json`` beside it; returns the statistics."""
    with needs("data"):
        import networkx as nx

    stats = graph_stats(g)
    atomic_write_json(path, nx.node_link_data(g, edges="edges", **_ENDS))
    atomic_write_json(path.with_name(f"{path.stem}_stats.json"), stats)
    return stats


def load_graph(path: Path) -> nx.MultiDiGraph:
    with needs("data"):
        import networkx as nx

    return nx.node_link_graph(json.loads(path.read_text(encoding="utf-8")), edges="edges", multigraph=True,
                              directed=True, **_ENDS)
