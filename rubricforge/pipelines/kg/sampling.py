"""Subgraph sampling (MindDR §4.1): chains of 1–5 hops and two-branch subgraphs meeting at the answer.

Walks move over the undirected view of the graph's *typed* edges (sources ``llm`` and ``text``: a
relation a sentence states), never revisiting a node; each step picks a neighbour with probability
proportional to ``degree ** -hub_exponent`` so hub entities (a country, a century) rarely carry a path.
A ``mentions`` link is never a hop: it only guides sampling, as a shortcut or a cross-branch tie that
rejects a candidate (:mod:`.constraints`). A candidate is kept only if it passes every check of
:mod:`.constraints` — structure, path necessity, structural independence, determinacy, then
reachability (the search, the costliest, last); each rejection is counted by the constraint that failed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rubricforge.config import KGConfig
from rubricforge.extras import needs
from rubricforge.pipelines.kg.constraints import (Search, check_determinacy, check_independence, check_necessity,
                                                  check_reachability, check_structure, passage_mentions)
from rubricforge.schema import KGEdge, KGPath

if TYPE_CHECKING:
    import networkx as nx


@dataclass
class Sampled:
    paths: list[KGPath]
    attempts: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # constraint -> candidates it rejected
    examples: dict[str, str] = field(default_factory=dict)  # constraint -> one failure message


def plan(cfg: KGConfig) -> list[tuple[str, list[int]]]:
    """The shapes to sample: ``("chain", [h])`` or ``("branch", [h1, h2])``, ``cfg.n_paths`` of them."""
    out = []
    for i in range(cfg.n_paths):
        h = cfg.hops[i % len(cfg.hops)]
        if cfg.branch_every and (i + 1) % cfg.branch_every == 0:
            out.append(("branch", [max(1, h - 1), 1]))
        else:
            out.append(("chain", [h]))
    return out


def _weighted(rng: random.Random, und: nx.Graph, options: list[str], exponent: float) -> str:
    return rng.choices(options, weights=[max(und.degree(n), 1) ** -exponent for n in options])[0]


def walk(und: nx.Graph, rng: random.Random, start: str, steps: int, exponent: float,
         avoid: AbstractSet[str] = frozenset()) -> list[str] | None:
    """A self-avoiding hub-weighted walk of ``steps`` edges from ``start`` (None when it gets stuck)."""
    nodes = [start]
    for _ in range(steps):
        options = sorted(n for n in und.neighbors(nodes[-1]) if n not in nodes and n not in avoid)
        if not options:
            return None
        nodes.append(_weighted(rng, und, options, exponent))
    return nodes


def typed_view(g: nx.MultiDiGraph) -> nx.Graph:
    """The undirected graph of the typed edges (every node with one), what walks move over."""
    with needs("data"):
        import networkx as nx

    und = nx.Graph()
    und.add_edges_from((u, v) for u, v, source in g.edges(data="source") if source != "link")
    return und


def hop_edge(g: nx.MultiDiGraph, a: str, b: str) -> KGEdge:
    """The typed edge stating a hop between ``a`` and ``b``: an LLM relation before a sentence's own words."""
    found = [d for u, v in ((a, b), (b, a)) for d in g.get_edge_data(u, v, default={}).values()
             if d["source"] != "link"]
    best = min(found, key=lambda d: (d["source"] != "llm", d["passage_id"], d["relation"]))
    return KGEdge.model_validate({k: best[k] for k in KGEdge.model_fields})


def make_path(g: nx.MultiDiGraph, pid: str, branches: list[list[str]]) -> KGPath:
    edges = [hop_edge(g, b[i], b[i + 1]) for b in branches for i in range(len(b) - 1)]
    nodes = list(dict.fromkeys(n for b in branches for n in b))
    return KGPath(id=pid, shape="branch" if len(branches) > 1 else "chain", branches=branches, edges=edges,
                  answer=branches[0][-1], hops=len(edges), names={n: g.nodes[n]["name"] for n in nodes},
                  descriptions={n: g.nodes[n]["description"] for n in nodes if g.nodes[n].get("description")},
                  passage_ids=list(dict.fromkeys(e.passage_id for e in edges)))


def candidate(g: nx.MultiDiGraph, und: nx.Graph, rng: random.Random, pid: str, shape: str, hops: list[int],
              nodes: list[str], exponent: float) -> KGPath | None:
    """One random subgraph of the planned shape (unchecked), or None when a walk got stuck."""
    if shape == "chain":
        nodes_ = walk(und, rng, _weighted(rng, und, nodes, exponent), hops[0], exponent)
        return make_path(g, pid, [nodes_]) if nodes_ else None
    hubs = [n for n in nodes if und.degree(n) >= len(hops)]
    if not hubs:
        return None
    answer = _weighted(rng, und, hubs, exponent)
    branches: list[list[str]] = []
    for h in hops:
        used = {n for b in branches for n in b}
        back = walk(und, rng, answer, h, exponent, avoid=used - {answer})
        if back is None:
            return None
        branches.append(back[::-1])
    return make_path(g, pid, branches)


def violations(g: nx.MultiDiGraph, path: KGPath, search: Search, k: int,
               mentions: dict[str, set[str]]) -> tuple[str, list[str]] | None:
    """The first constraint the path breaks and its failures, or None when it passes all."""
    for name, check in (("structure", lambda: check_structure(g, path)),
                        ("necessity", lambda: check_necessity(g, path, mentions)),
                        ("independence", lambda: check_independence(g, path, mentions)),
                        ("determinacy", lambda: check_determinacy(path)),
                        ("reachability", lambda: check_reachability(path, search, k))):
        if failures := check():
            return name, failures
    return None


def sample_paths(g: nx.MultiDiGraph, cfg: KGConfig, search: Search) -> Sampled:
    """``cfg.n_paths`` checked subgraphs (fewer when ``cfg.sample_attempts`` runs out for a shape)."""
    rng = random.Random(cfg.seed)
    und = typed_view(g)
    nodes = sorted(n for n in und if und.degree(n) > 0)
    mentions = passage_mentions(g)
    out = Sampled(paths=[])
    if not nodes:
        return out
    for i, (shape, hops) in enumerate(plan(cfg)):
        pid = f"kgp-{i:04d}"
        for _ in range(cfg.sample_attempts):
            out.attempts += 1
            path = candidate(g, und, rng, pid, shape, hops, nodes, cfg.hub_exponent)
            if path is None:
                out.rejected["dead end"] += 1
                continue
            if any(set(path.names) == set(p.names) for p in out.paths):  # the same entities, another shape
                out.rejected["duplicate"] += 1
                continue
            if (broken := violations(g, path, search, cfg.reach_k, mentions)) is not None:
                out.rejected[broken[0]] += 1
                out.examples.setdefault(broken[0], broken[1][0])
                continue
            out.paths.append(path)
            break
    return out
