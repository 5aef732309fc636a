"""The three subgraph constraints of MindDR §4.1, each a check that returns its failures (empty = pass).

* :func:`check_reachability` — every hop is stated in a passage the shared search tool retrieves: a
  search for the hop's two entity names must return the edge's passage in its top ``k``.
* :func:`check_necessity` — no shortcut: along each branch, no edge and no passage links a node to
  any node two or more hops further on (in particular the start or an intermediate to the answer); and no
  intermediate entity is one a reader names from its noun alone (:data:`SELF_EVIDENT`).
* :func:`check_independence` — the branches of a multi-branch subgraph share only the answer: no
  common node, no edge and no passage linking a node of one branch to a node of another.
* :func:`check_determinacy` — every hop determines the entity it leads to, so the answer is the only one
  the facts allow (MindDR's answer uniqueness, checked on the relation's words): read along its direction
  ("Lyon *is a city in* France": Lyon → France) a relation of the form copula + article + noun ("is a city
  in", "is the capital of") or copula + a participle that names one thing ("was born in", "was founded
  by") does; read against it (France → ?) only a definite role does ("Paris *is the capital of* France":
  France → Paris), since France has many cities; and no role is said of two entities of the subgraph ("Donetsk
  *was the fifth-largest city in* Ukraine" beside "Lviv *is the fifth-largest city in* Ukraine").

:func:`check_structure` guards the rest: every hop is a typed edge of the graph between consecutive nodes (a
``mentions`` link states no fact, so it is never a hop).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from itertools import combinations
from typing import TYPE_CHECKING

from rubricforge.schema import KGPath

if TYPE_CHECKING:
    import networkx as nx

Search = Callable[[str, int], list[str]]  # (query, k) -> passage ids, best first
_COPULA = r"(?:is|was|are|were|has been|had been)\s+(?:[a-z]+ly\s+)?"
DEFINITE = re.compile(rf"^{_COPULA}the\s")  # "is the capital of": one entity per tail
FUNCTIONAL = re.compile(rf"^{_COPULA}(?:the|a|an)\s|^{_COPULA}(?:born|founded|located|named|succeeded|preceded|"
                        r"written|designed|built|established|created|invented|composed|painted)\s")


def passage_mentions(g: nx.MultiDiGraph) -> dict[str, set[str]]:
    """Node -> the passages that mention it (its own article's passages, and those of every edge it is an
    end of)."""
    out: dict[str, set[str]] = defaultdict(set)
    for n, pids in g.nodes(data="passage_ids"):
        out[n].update(pids or ())
    for u, v, pid in g.edges(data="passage_id"):
        out[u].add(pid)
        out[v].add(pid)
    return out


def linked(g: nx.MultiDiGraph, a: str, b: str) -> bool:
    return g.has_edge(a, b) or g.has_edge(b, a)


def _shared_passages(mentions: dict[str, set[str]], a: str, b: str) -> list[str]:
    return sorted(mentions.get(a, set()) & mentions.get(b, set()))


def check_structure(g: nx.MultiDiGraph, path: KGPath) -> list[str]:
    failures = []
    hops = [(b[i], b[i + 1]) for b in path.branches for i in range(len(b) - 1)]
    if len(hops) != len(path.edges) or len(hops) != path.hops:
        failures.append(f"{len(path.edges)} edges for {len(hops)} hops")
    for (a, b), e in zip(hops, path.edges, strict=True):
        if {e.head, e.tail} != {a, b}:
            failures.append(f"edge {e.head}->{e.tail} is not the hop {a}–{b}")
        elif e.source == "link":
            failures.append(f"hop {e.head}->{e.tail} is a bare link ({e.relation}), not a stated relation")
        elif not any(d.get("passage_id") == e.passage_id and d.get("relation") == e.relation
                     for d in g.get_edge_data(e.head, e.tail, default={}).values()):
            failures.append(f"edge {e.head}->{e.tail} ({e.relation}, {e.passage_id}) is not in the graph")
    if any(b[-1] != path.answer for b in path.branches):
        failures.append("a branch does not end at the answer")
    return failures


def check_reachability(path: KGPath, search: Search, k: int) -> list[str]:
    failures = []
    for e in path.edges:
        query = f"{path.names.get(e.head, e.head)} {path.names.get(e.tail, e.tail)}"
        if e.passage_id not in search(query, k)[:k]:
            failures.append(f"hop {e.head}->{e.tail}: passage {e.passage_id} is not in the top {k} for '{query}'")
    return failures


def _role(relation: str) -> str:
    """A relation without its copula and tense: "was the fifth-largest city in" -> "the fifth-largest city in"."""
    return re.sub(rf"^{_COPULA}", "", relation.strip())


def check_determinacy(path: KGPath) -> list[str]:
    failures = []
    ends: dict[tuple[str, str], str] = {}  # (role, the node it is held in) -> the entity holding it
    for e in path.edges:
        held = ends.setdefault((_role(e.relation), e.tail), e.head)
        if held != e.head:
            failures.append(f"'{_role(e.relation)}' {e.tail} is said of both {held} and {e.head}: two entities "
                            f"fit the role")
    for branch in path.branches:
        for a, b in zip(branch, branch[1:], strict=False):
            e = path.hop(a, b)
            forward = e.head == a
            if not (FUNCTIONAL if forward else DEFINITE).search(e.relation):
                failures.append(f"hop {a}->{b} ('{e.relation}' read {'along' if forward else 'against'} its "
                                f"direction) does not determine {b}")
    return failures


# Entities a reader names from the noun alone: "Tibet is the highest region on a planet. Which trench is the deepest
# oceanic trench on that planet?" (seed 0) needs no first hop. Never an intermediate of a path.
SELF_EVIDENT = frozenset({"Earth", "World", "Universe"})


def check_necessity(g: nx.MultiDiGraph, path: KGPath, mentions: dict[str, set[str]] | None = None) -> list[str]:
    mentions = passage_mentions(g) if mentions is None else mentions
    failures = [f"{path.names[n]} is named by its noun alone: the hop into it states no condition"
                for n in dict.fromkeys(path.intermediates()) if path.names.get(n) in SELF_EVIDENT]
    for branch in path.branches:
        for i, j in combinations(range(len(branch)), 2):
            if j - i < 2:
                continue
            a, b = branch[i], branch[j]
            if linked(g, a, b):
                failures.append(f"shortcut edge {a}–{b} skips {j - i - 1} hop(s)")
            if shared := _shared_passages(mentions, a, b):
                failures.append(f"shortcut passage {shared[0]} mentions both {a} and {b}")
    return failures


def check_independence(g: nx.MultiDiGraph, path: KGPath, mentions: dict[str, set[str]] | None = None) -> list[str]:
    if len(path.branches) < 2:
        return []
    mentions = passage_mentions(g) if mentions is None else mentions
    failures = []
    for x, y in combinations(range(len(path.branches)), 2):
        bx, by = (set(path.branches[i]) - {path.answer} for i in (x, y))
        if common := sorted(bx & by):
            failures.append(f"branches {x} and {y} share {common[0]}")
        for a in sorted(bx - by):
            for b in sorted(by - bx):
                if linked(g, a, b):
                    failures.append(f"cross-branch edge {a}–{b}")
                if shared := _shared_passages(mentions, a, b):
                    failures.append(f"cross-branch passage {shared[0]} mentions both {a} and {b}")
    return failures
