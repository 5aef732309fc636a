"""Graph construction (MindDR §4.1): entities and typed relations over the corpus, in networkx.

* **Corpus link structure** (:func:`title_links`, no LLM): an article whose text mentions another
  article's title (whole words, case-sensitive, titles of at least ``min_title_chars``) gets a
  ``mentions`` edge to it (source ``link``), kept with the passage id and the sentence that mentions it.
  A link says two articles are related, not how: it guides sampling (shortcut and independence checks)
  and is never a hop.
* **Stated relations** (:func:`title_links` too, no LLM; source ``text``): where one sentence writes two
  whole names (article titles, the passage's own title among them), the first starting a clause, with only
  a short verb phrase between them (:func:`stated_relation`: "is the capital of", "was succeeded by",
  "married"), that phrase is a typed ``head --relation--> tail`` edge: both entities and the relation's
  words are in the sentence. Not when a qualifier follows the second name: "Romanesque art is the art of Europe
  *from* approximately 1000 AD …" states the art of a time, not *the* art of Europe; "Munich is the largest city in
  Germany *that* is not a state of its own" is not the largest city in Germany.
* **LLM relations** (:mod:`.extract`; source ``llm``): typed triples from a slice of passages, each kept
  only when one sentence of its passage writes both names and the relation's words.
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
from rubricforge.io.files import atomic_write_json
from rubricforge.schema import KGEdge, Passage
from rubricforge.text import clip, sentence_spans

if TYPE_CHECKING:
    import networkx as nx

WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")
MAX_EVIDENCE_CHARS = 300
MAX_RELATION_WORDS = 6
LEAD_CHARS = 300  # of an article's first sentence, kept on its node (what the answer-type check reads)
_LOWER_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")
_ARTICLES = frozenset("a an the".split())
_PREPOSITIONS = frozenset("in of on at to by for from with into onto after as than within".split())
_PAIRED = frozenset("between among".split())  # "was fought between [Russia and …]": one name is half the fact
_LIST_WORDS = frozenset("and or but nor".split())
_RELATIVES = frozenset("who whom whose which that where when while".split())  # the clause's subject is another
_COPULAS = frozenset("is was are were be been being has had have became becomes".split())
_PARTICIPLES = frozenset("born known built won led made held written given found named became".split())
FUNCTION_WORDS = frozenset("""a an the of in on at to by for from with as and or its his her their into onto upon
after before during within under over between than also then""".split())
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


def short_forms(name: str) -> list[str]:
    """``name`` and its shorter forms that still name it: without a trailing parenthetical ("Mercury (planet)"
    -> "Mercury") and before a comma ("Fez, Morocco" -> "Fez")."""
    bare = re.sub(r"\s*\([^)]*\)\s*$", "", name)
    return list(dict.fromkeys(f for f in (name, bare, bare.split(",")[0].strip()) if f.strip()))


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
        if not node["lead"]:
            node["lead"] = clip(next(iter(sentences(passage.text)), ""), LEAD_CHARS)
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
                                           "lead": "", "kind": kind})

    @staticmethod
    def _alias(node: dict[str, Any], surface: str) -> None:
        if surface not in node["aliases"]:
            node["aliases"].append(surface)


def name_pattern(name: str) -> re.Pattern[str]:
    """``name`` as whole words, any case: "Don" in "the Don flows", not in "Donetsk"."""
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (:func:`rubricforge.text.sentence_spans`, the tree's splitter)."""
    return [text[a:b] for a, b in sentence_spans(text)]


def stated_relation(words: list[str]) -> str | None:
    """The relation that the words between two names state, or None: 1 to :data:`MAX_RELATION_WORDS` lower-case
    words (no punctuation, no other name), not a list ("and", "or" at either end), with a verb (a copula, an
    auxiliary, a past participle; an adverb before it) first and a content word, not a relative clause ("who
    went on to found"), ending in a preposition or a past tense (else the second name modifies a noun: "was a
    classical [Arabic poet]"):
    ``["is", "the", "capital", "of"]`` -> ``"is the capital of"``; ``["and"]``, ``["is", "in"]``, ``["near"]``, ``["was",
    "fought", "between"]`` (the other party is half the fact) -> None."""
    if not 1 <= len(words) <= MAX_RELATION_WORDS or not all(_LOWER_WORD.fullmatch(w) for w in words):
        return None
    if words[0] in _LIST_WORDS | _RELATIVES or words[-1] in _LIST_WORDS:
        return None
    if not (words[0] in _COPULAS or words[0] in _PARTICIPLES or words[0].endswith(("ed", "ly"))):
        return None  # the phrase opens with its verb (or an adverb): "machines were invented" is a noun's
    if all(w in FUNCTION_WORDS or w in _COPULAS for w in words):
        return None
    while words[-1] in _ARTICLES:
        words = words[:-1]
    if words[-1] in _PAIRED:
        return None
    if not (words[-1] in _PREPOSITIONS or words[-1].endswith("ed")):
        return None  # "was a classical [Arabic poet]": the name is a modifier, not the relation's other end
    return " ".join(words)


def whole_name(toks: list[str], start: int, end: int) -> bool:
    """Whether ``toks[start:end]`` is a whole name, not a word of a longer one ("Monarchy" in "Austro-Hungarian
    Monarchy", "Republic" in "Republic of Moldova"): no capitalised word (a sentence's first function word
    aside) right before or after it, nor "of" (the) and a capitalised word after it."""
    def named(i: int) -> bool:
        return 0 <= i < len(toks) and toks[i][:1].isupper() and not (i == 0 and toks[i].lower() in FUNCTION_WORDS)
    after = toks[end + 2:end + 3] if toks[end + 1:end + 2] == ["the"] else toks[end + 1:end + 2]
    return not named(start - 1) and not named(end) and not (toks[end:end + 1] in (["of"], ["de"])
                                                             and after[:1] and after[0][:1].isupper())


def _modifier(toks: list[str], end: int) -> bool:
    """Whether the name ending at ``toks[end]`` modifies a noun that names someone else: "by the Song dynasty
    *painter Zhang* Zeduan" (the painting is by Zhang, not by the dynasty); a participle is no such noun ("in
    West Asia *spanning Iran*")."""
    return len(toks) > end + 1 and bool(_LOWER_WORD.fullmatch(toks[end])) and toks[end + 1][:1].isupper() \
        and toks[end] not in FUNCTION_WORDS | _RELATIVES | _LIST_WORDS and not toks[end].endswith(("ing", "ed"))


def _subject(toks: list[str], start: int) -> bool:
    """Whether a name at ``toks[start]`` is where a clause starts (the sentence's start, after its article, or
    after a comma): the subject of the verb phrase that follows, not a noun's modifier ("the history of France
    appeared in")."""
    return start == 0 or (start == 1 and toks[0] in ("The", "A", "An")) or toks[start - 1] == ","


# after the second name, words that restrict the relation to a time or a part: "the art of Europe from
# approximately 1000 AD", "the largest city in Germany that is not a state of its own"
_QUALIFIER = frozenset("from between until till during since before after that which except excluding outside "
                       "besides".split())


def title_links(passages: Iterable[Passage], resolver: EntityResolver, min_title_chars: int = 4) -> list[KGEdge]:
    """``mentions`` edges from each passage's article to every other article title its text contains, and the
    typed edges its sentences state between two names (module docstring)."""
    passages = list(passages)
    titles: dict[tuple[str, ...], str] = {}
    for p in passages:
        if p.title and len(p.title) >= min_title_chars:
            titles.setdefault(tuple(WORD.findall(p.title)), node_id(p.title))
    by_first: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for title_toks in titles:
        if title_toks:
            by_first[title_toks[0]].append(title_toks)
    edges: list[KGEdge] = []
    for p in passages:
        head = node_id(p.title)
        # its short title ("Mercury" of "Mercury (planet)", "Fez" of "Fez, Morocco") names its own article too
        own = {tuple(WORD.findall(form)) for form in short_forms(p.title)} - {()}
        seen: set[str] = set()
        stated: set[tuple[str, str, str]] = set()
        for sentence in sentences(p.text):
            toks = WORD.findall(sentence)
            found: list[tuple[int, int, str]] = []  # (start, end, node) of each name, in order
            i = 0
            while i < len(toks):
                match = max((t for t in (*by_first.get(toks[i], ()), *own) if tuple(toks[i:i + len(t)]) == t),
                            key=len, default=None)  # the longest: "New York City" before "New York"
                if match is None:
                    i += 1
                    continue
                tail = head if match in own else titles[match]
                found.append((i, i + len(match), tail))
                if tail != head and tail not in seen:
                    seen.add(tail)
                    edges.append(KGEdge(head=head, relation="mentions", tail=tail, passage_id=p.id,
                                        evidence=clip(sentence, MAX_EVIDENCE_CHARS), source="link"))
                i += len(match)
            for (a0, a1, a), (b0, b1, b) in zip(found, found[1:], strict=False):
                relation = stated_relation(toks[a1:b0]) if a != b else None
                if relation and _subject(toks, a0) and whole_name(toks, a0, a1) and whole_name(toks, b0, b1) and \
                        not _modifier(toks, b1) and (b1 == len(toks) or toks[b1] not in _QUALIFIER) and \
                        (a, relation, b) not in stated:
                    stated.add((a, relation, b))
                    edges.append(KGEdge(head=a, relation=relation, tail=b, passage_id=p.id,
                                        evidence=clip(sentence, MAX_EVIDENCE_CHARS), source="text"))
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
