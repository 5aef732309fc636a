"""Stage 1: top-down evidence-tree construction (DeepRubric §3.1, Algorithm 1, App. C.2).

A tree grows breadth-first from a seed's root query. Every node is retrieved for (the shared
``search`` tool, ``build.passages_per_node`` passages that pass the *passage gate*, below) and its passages are
read by the evidence
extractor (one call per passage, 1–3 statements each, tied to that passage's id). With
``build.extract="sentences"`` (the default) the extractor picks passage sentences by id — the ids are
the only values the JSON-schema grammar allows — so every statement is an exact span of the passage
with its offsets; ``"free"`` is the paper's Fig. 10, which writes the statements. Then a whole level
is expanded before the next:

1. *Proposal* (Fig. 9): each expandable node — above ``build.max_depth`` and not judged atomic —
   proposes up to ``branching[depth]`` child sub-queries (``build.branching`` = root, intermediate,
   deeper; the last value repeats).
2. The per-tree node budget (``build.max_nodes``) is spent round-robin over the level's parents:
   every parent's first proposal, then every parent's second, ... so the budget spreads across the
   root's facets instead of being eaten by the first one. Proposals are requested lazily, so a parent
   the budget can never reach costs no call.
3. *Redundancy*: a proposal whose embedding has cosine similarity above
   ``build.redundancy_threshold`` with an ancestor or an accepted sibling is dropped (no LLM call).
4. *Grounding* + *gating*, one structured call per surviving proposal: it is retrieved for (passages
   the tree already holds are skipped, so every node adds new evidence), and the
   model selects the passages that support it (ids constrained to those shown); with none it is
   dropped. For a child that could still be expanded the same call judges whether it is atomic
   (App. C.2 step 3); an atomic child becomes a leaf.

*Passage gate* (ours, before any LLM call reads a passage): each retrieved passage is embedded with the index's
own encoder and scored against the node's sub-query and the tree's root query; a passage whose cosine with
either is below ``build.passage_gate`` is not taken (the next retrieved one is), and is recorded in
``tree.gated``. A proposal none of whose passages passes is dropped as ``off_topic`` without a grounding call.
The 1.5B grounding model accepted passages on Atal Bihari Vajpayee under a Mandalay tree and on the Eiffel Tower
under the prime number theorem; the threshold and the scores it was measured on are in ``docs/methods.md``.

Every drop is recorded in ``tree.dropped`` with its reason; a structured call that fails after the
client's re-prompts is recorded (a node note or a drop), never filled in, and counted in
``tree.invalid_answers`` (the job builds such a tree again: :mod:`rubricforge.pipelines.tree.run`).

Retrieval and query embedding are CPU work: the ToolBox and the index run them on their own worker
threads (:meth:`ToolBox.asearch_snippets`, :meth:`CorpusIndex.aembed_queries`), never on the event loop,
so LLM calls of other trees keep flowing. The redundancy check embeds a batch of proposals in one
call, and the root query is embedded the same way before its search (the index embeds the calls of all
trees in flight together); the searches that follow find those vectors in the index's query cache.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, Field, create_model

from rubricforge.config import Config
from rubricforge.corpora.embedding import passage_input
from rubricforge.llm.structured import max_length
from rubricforge.pipelines.prompting import render
from rubricforge.pipelines.tree.seeds import Seed
from rubricforge.schema import EvidenceNode, EvidenceStatement, EvidenceTree, Snippet
from rubricforge.text import one_line, sentence_spans

if TYPE_CHECKING:
    from rubricforge.corpora.tools import ToolBox
    from rubricforge.llm import LLMClient, LLMResult

MAX_STATEMENTS = 3  # per passage (Fig. 10)
PROMPT_STATEMENTS = 8  # "Statements (sample, deduped top 8)" (Fig. 9)
PROMPT_SNIPPET_CHARS = 300  # per passage in the decomposition prompt
QUERY_CHARS = 90  # schema hint for sub-queries ("<12 tokens", Fig. 9)
STATEMENT_CHARS = 240  # schema hint for one statement ("concise", Fig. 10)
ROOT_CANDIDATES = 4  # the root's retrieval looks this many times passages_per_node deep for passages the gate passes
SubQuery = Annotated[str, max_length(QUERY_CHARS)]
Statement = Annotated[str, max_length(STATEMENT_CHARS)]


# ---------------------------------------------------------------- output models


class Statements(BaseModel):
    """Fig. 10 answer. Schema bounds steer constrained decoding; extra items are cut, not rejected."""

    statements: list[Statement] = Field(json_schema_extra={"maxItems": MAX_STATEMENTS})


@lru_cache(maxsize=None)
def selection_model(labels: tuple[str, ...]) -> type[BaseModel]:
    """Sentence-selection answer: 1–3 ids of the passage's numbered sentences (only the labels shown)."""
    ids = Field(json_schema_extra={"minItems": 1, "maxItems": min(MAX_STATEMENTS, len(labels))})
    return create_model("SentenceSelection", sentence_ids=(list[Literal[labels]], ids))  # type: ignore[valid-type]


@lru_cache(maxsize=None)
def proposal_model(limit: int) -> type[BaseModel]:
    """Fig. 9 answer ``{"queries": [...]}`` with at most ``limit`` items in the schema."""
    return create_model(f"Proposal{limit}", queries=(list[SubQuery], Field(json_schema_extra={"maxItems": limit})))


@lru_cache(maxsize=None)
def grounding_model(labels: tuple[str, ...], gate: bool) -> type[BaseModel]:
    """Grounding answer: supporting passage ids (only the labels shown), plus ``atomic`` when gating."""
    ids = Field(json_schema_extra={"maxItems": len(labels)})  # bounded: a small model may repeat an id forever
    fields: dict[str, Any] = {"supporting_ids": (list[Literal[labels]], ids)}  # type: ignore[valid-type]
    if gate:
        fields["atomic"] = (bool, ...)
    return create_model("GroundGate" if gate else "Ground", **fields)


# ---------------------------------------------------------------- helpers


def branching_for(depth: int, branching: Sequence[int]) -> int:
    """Children allowed below a node at ``depth``: root, intermediate, then the last value."""
    return branching[min(depth, len(branching) - 1)]


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _labels(snippets: Sequence[Snippet]) -> list[str]:
    return [f"P{i}" for i in range(1, len(snippets) + 1)]


def _passage_block(snippets: Sequence[Snippet], chars: int | None = None) -> str:
    return "\n".join(f"[{label}] {s.title}: {s.text if chars is None else one_line(s.text, chars)}"
                     for label, s in zip(_labels(snippets), snippets, strict=True))


def passage_sentences(snippet: Snippet) -> list[EvidenceStatement]:
    """The snippet's sentences as exact spans of its passage (a snippet is the passage's whitespace-normalised
    text, cut with `` …``: offsets are the passage's; the cut, unfinished last sentence is left out)."""
    text, cut = (snippet.text[:-2], True) if snippet.text.endswith(" \u2026") else (snippet.text, False)
    spans = sentence_spans(text)
    if cut and len(spans) > 1:
        spans = spans[:-1]
    return [EvidenceStatement(text=text[a:b], passage_id=snippet.passage_id, start=a, end=b) for a, b in spans]


def _clean(items: Sequence[str], limit: int) -> list[str]:
    out: list[str] = []
    for item in items:
        text = " ".join(str(item).split())
        if text and text.lower() not in {o.lower() for o in out}:
            out.append(text)
    return out[:limit]


@dataclass
class _Child:
    parent: EvidenceNode
    query: str
    retrieved: list[Snippet] = field(default_factory=list)  # passages found for it (:meth:`_retrieve_fresh`)
    gated: int = 0  # retrieved passages the passage gate kept out
    snippets: list[Snippet] | None = None  # the supporting passages, once grounded
    atomic: bool | None = None
    drop: tuple[str, str] | None = None  # (reason, detail) when it is not grounded


# ---------------------------------------------------------------- the builder


Embed = Callable[[list[str]], Awaitable[np.ndarray]]


class TreeBuilder:
    """Builds evidence trees with one LLM client, one ToolBox and the index's encoder.

    ``await embed(texts)`` returns L2-normalised query vectors (``CorpusIndex.aembed_queries``),
    ``await embed_passages(texts)`` passage vectors (``CorpusIndex.aembed_passages``), which the passage gate
    needs; without it (scheduling tests) every retrieved passage is read.
    """

    def __init__(self, cfg: Config, client: LLMClient, tools: ToolBox, embed: Embed, corpus_hash: str = "",
                 embed_passages: Embed | None = None):
        self.cfg, self.b = cfg, cfg.build
        self.client, self.tools, self._embed, self.corpus_hash = client, tools, embed, corpus_hash
        self._embed_passages = embed_passages

    async def build(self, tree_id: str, seed: Seed) -> EvidenceTree:
        """Algorithm 1, stage 1, for one seed (see the module docstring)."""
        state = _TreeState(tree_id, seed, self.corpus_hash, self.b.max_nodes)
        await self._embed_missing(state, [seed.query])  # needed by the redundancy check; batched with other trees'
        root = state.add(seed.query, parent=None, snippets=await self._retrieve_root(state))
        await self._extract(state, [root])
        level = [root]
        while level and state.budget() > 0:
            parents = [n for n in level if n.depth < self.b.max_depth and n.atomic is not True]
            children = await self._expand_level(state, parents)
            await self._extract(state, children)
            level = children
        return state.tree()

    # ---------------------------------------------------------- retrieval and extraction

    async def _retrieve_root(self, state: _TreeState) -> list[Snippet]:
        """The root's top ``build.passages_per_node`` passages that pass the gate."""
        query, k = state.seed.query, self.b.passages_per_node
        found = await self.tools.asearch_snippets([query], k * (ROOT_CANDIDATES if self._gating() else 1))
        await self._score_passages(state, found)
        return self._gate(state, query, found, k)[0]

    async def _retrieve_fresh(self, state: _TreeState, children: list[_Child]) -> None:
        """Sets each child's ``retrieved``: its top ``build.passages_per_node`` passages that pass the gate, that
        the tree does not hold and that no earlier child of the batch took. Searched together, assigned in order:
        deterministic."""
        k = self.b.passages_per_node
        wide = k * (len(children) + 1) + len(state.claimed)
        hits = await asyncio.gather(*(self.tools.asearch_snippets([c.query], wide) for c in children))
        await self._score_passages(state, [s for found in hits for s in found if s.passage_id not in state.claimed])
        for child, found in zip(children, hits, strict=True):
            child.retrieved, child.gated = self._gate(state, child.query,
                                                      [s for s in found if s.passage_id not in state.claimed], k)
            state.claimed.update(s.passage_id for s in child.retrieved)

    def _gating(self) -> bool:
        return self._embed_passages is not None and self.b.passage_gate > -1

    async def _score_passages(self, state: _TreeState, snippets: list[Snippet]) -> None:
        """Embed (in one call) the passages the tree has no vector for yet (only when the gate is on)."""
        if not self._gating():
            return
        missing = list({s.passage_id: s for s in snippets if s.passage_id not in state.passage_vectors}.values())
        if missing and self._embed_passages is not None:
            vectors = await self._embed_passages([passage_input(s.title, s.text) for s in missing])
            state.passage_vectors.update(zip((s.passage_id for s in missing), vectors, strict=True))

    def _gate(self, state: _TreeState, query: str, snippets: list[Snippet], k: int) -> tuple[list[Snippet], int]:
        """The first ``k`` of ``snippets`` whose cosine with ``query`` and with the root query both reach
        ``build.passage_gate``, and how many before the last of them did not (each recorded in ``tree.gated``)."""
        if not self._gating():
            return snippets[:k], 0
        to_query, to_root = state.vectors[query], state.vectors[state.seed.query]
        kept: list[Snippet] = []
        gated = 0
        for s in snippets:
            if len(kept) == k:
                break
            vector = state.passage_vectors[s.passage_id]
            scores = float(np.dot(vector, to_query)), float(np.dot(vector, to_root))
            if min(scores) >= self.b.passage_gate:
                kept.append(s)
                continue
            gated += 1
            state.gated.append({"query": query, "passage_id": s.passage_id, "title": s.title,
                                "query_cosine": round(scores[0], 4), "root_cosine": round(scores[1], 4)})
        return kept, gated

    async def _extract(self, state: _TreeState, nodes: list[EvidenceNode]) -> None:
        jobs = [(node, s) for node in nodes for s in state.snippets[node.id]]
        extract = self._select_sentences if self.b.extract == "sentences" else self._write_statements
        results = await asyncio.gather(*(extract(state, node, s) for node, s in jobs))
        for (node, _), statements in zip(jobs, results, strict=True):
            node.statements.extend(statements)

    async def _write_statements(self, state: _TreeState, node: EvidenceNode, snippet: Snippet) -> list[EvidenceStatement]:
        """Fig. 10: the extractor writes 1–3 statements from the passage."""
        prompt = render("extract", queries=json.dumps([node.query], ensure_ascii=False), note=self._note(state),
                        summary=f"{snippet.title}: {' '.join(snippet.text.split())}")
        res = await self.client.generate("generator", _user(prompt), output=Statements, stage="extract",
                                         max_tokens=self.b.node_max_tokens)
        if state.failed(res):
            node.notes.append(f"extract failed for passage {snippet.passage_id}: {res.error or 'no output'}")
            return []
        return [EvidenceStatement(text=t, passage_id=snippet.passage_id)
                for t in _clean(res.value.statements, MAX_STATEMENTS)]

    async def _select_sentences(self, state: _TreeState, node: EvidenceNode, snippet: Snippet) -> list[EvidenceStatement]:
        """The extractor picks 1–3 of the passage's numbered sentences: statements are exact spans."""
        sentences = passage_sentences(snippet)
        if not sentences:
            return []
        labels = [f"S{i}" for i in range(1, len(sentences) + 1)]
        prompt = render("extract_sentences", queries=json.dumps([node.query], ensure_ascii=False), note=self._note(state),
                        title=snippet.title, sentences="\n".join(f"[{label}] {s.text}" for label, s in zip(labels, sentences, strict=True)))
        res = await self.client.generate("generator", _user(prompt), output=selection_model(tuple(labels)),
                                         stage="extract", max_tokens=self.b.node_max_tokens)
        if state.failed(res):
            node.notes.append(f"extract failed for passage {snippet.passage_id}: {res.error or 'no output'}")
            return []
        by_label = dict(zip(labels, sentences, strict=True))
        return [by_label[label] for label in dict.fromkeys(res.value.sentence_ids)][:MAX_STATEMENTS]

    @staticmethod
    def _note(state: _TreeState) -> str:
        return f'Collect evidence for the research topic "{state.seed.query}".'

    # ---------------------------------------------------------- expansion of one level

    async def _expand_level(self, state: _TreeState, parents: list[EvidenceNode]) -> list[EvidenceNode]:
        proposals: dict[str, list[str]] = {}
        accepted: list[EvidenceNode] = []
        rounds = max((branching_for(p.depth, self.b.branching) for p in parents), default=0)
        for r in range(rounds):
            queue = [p for p in parents if p.id not in proposals or r < len(proposals[p.id])]
            while queue and state.budget() > 0:
                batch, queue = queue[: state.budget()], queue[state.budget():]
                missing = [p for p in batch if p.id not in proposals]
                for p, queries in zip(missing, await asyncio.gather(*(self._propose(state, p) for p in missing)), strict=True):
                    proposals[p.id] = queries
                wanted = [_Child(p, proposals[p.id][r]) for p in batch if r < len(proposals[p.id])]
                await self._embed_missing(state, [t for c in wanted for t in self._redundancy_texts(state, c)])
                fresh = [c for c in wanted if self._non_redundant(state, c)]
                await self._retrieve_fresh(state, fresh)
                await asyncio.gather(*(self._ground(state, c) for c in fresh))
                for child in fresh:
                    if child.snippets:
                        node = state.add(child.query, parent=child.parent, snippets=child.snippets)
                        node.atomic = child.atomic
                        accepted.append(node)
        return accepted

    async def _propose(self, state: _TreeState, parent: EvidenceNode) -> list[str]:
        limit = branching_for(parent.depth, self.b.branching)
        ancestors = [state.nodes[i].query for i in state.path(parent.id)[:-1]]
        statements = _clean([s.text for s in parent.statements], PROMPT_STATEMENTS)
        prompt = render("decompose", parent_query=parent.query,
                        ancestors=json.dumps(ancestors, ensure_ascii=False) if ancestors else "(none: this is the root)",
                        depth=parent.depth, max_depth=self.b.max_depth,
                        snippets=_passage_block(state.snippets[parent.id], PROMPT_SNIPPET_CHARS) or "(none)",
                        statements=json.dumps(statements, ensure_ascii=False), limit=limit)
        res = await self.client.generate("generator", _user(prompt), output=proposal_model(limit), stage="decompose",
                                         max_tokens=self.b.node_max_tokens)
        if state.failed(res):
            parent.notes.append(f"decompose failed: {res.error or 'no output'}")
            return []
        queries = _clean(res.value.queries, limit)
        if not queries:
            parent.notes.append("decompose proposed no sub-query")
        return queries

    async def _embed_missing(self, state: _TreeState, texts: list[str]) -> None:
        """Embed (in one call) the texts the tree has no vector for yet."""
        missing = [t for t in dict.fromkeys(texts) if t not in state.vectors]
        if missing:
            state.vectors.update(zip(missing, await self._embed(missing), strict=True))

    @staticmethod
    def _others(state: _TreeState, child: _Child) -> list[EvidenceNode]:
        """The ancestors and accepted siblings a proposal must not repeat."""
        return [state.nodes[i] for i in state.path(child.parent.id)] + [state.nodes[c] for c in child.parent.children]

    def _redundancy_texts(self, state: _TreeState, child: _Child) -> list[str]:
        return [child.query] + [o.query for o in self._others(state, child)]

    def _non_redundant(self, state: _TreeState, child: _Child) -> bool:
        """False (and recorded) when the child repeats an ancestor or an accepted sibling (vectors embedded
        beforehand by :meth:`_embed_missing`)."""
        others = self._others(state, child)
        if not others:
            return True
        vecs = [state.vectors[t] for t in [child.query] + [o.query for o in others]]
        sims = [float(np.dot(vecs[0], v)) for v in vecs[1:]]
        best = int(np.argmax(sims))
        if sims[best] > self.b.redundancy_threshold:
            kind = "sibling" if others[best].parent_id == child.parent.id else "ancestor"
            state.drop(child, "redundant", f"cosine {sims[best]:.3f} > {self.b.redundancy_threshold} with {kind} "
                                           f"{others[best].id} \"{others[best].query}\"")
            return False
        return True

    async def _ground(self, state: _TreeState, child: _Child) -> None:
        """Sets ``child.snippets`` (and ``atomic``) when grounded; otherwise records the drop. The passages it
        does not keep are released for its siblings."""
        snippets = child.retrieved
        try:
            await self._judge_support(state, child, snippets)
        finally:
            state.claimed.difference_update(s.passage_id for s in snippets if s not in (child.snippets or []))
        if child.drop:
            state.drop(child, *child.drop)

    async def _judge_support(self, state: _TreeState, child: _Child, snippets: list[Snippet]) -> None:
        if not snippets and child.gated:
            child.drop = ("off_topic", f"each of the {child.gated} retrieved passages the tree does not hold has a "
                                       f"cosine below build.passage_gate={self.b.passage_gate} with the sub-query or "
                                       f"the root topic \"{state.seed.query}\"")
            return
        if not snippets:
            child.drop = ("ungrounded", "retrieval returned no passage the tree does not already hold")
            return
        labels = _labels(snippets)
        depth = child.parent.depth + 1
        gate = depth < self.b.max_depth
        prompt = render("ground", parent_query=child.parent.query, query=child.query, passages=_passage_block(snippets))
        if gate:
            prompt += "\n" + render("gate", depth=depth, max_depth=self.b.max_depth)
        res = await self.client.generate("generator", _user(prompt), output=grounding_model(tuple(labels), gate),
                                         stage="ground", max_tokens=self.b.node_max_tokens)
        if state.failed(res):
            child.drop = ("ground_failed", f"grounding call failed: {res.error or 'no output'}")
            return
        chosen = set(res.value.supporting_ids)
        if not chosen:
            child.drop = ("ungrounded", f"none of the {len(snippets)} retrieved passages supports it")
            return
        child.snippets = [s for label, s in zip(labels, snippets, strict=True) if label in chosen]
        child.atomic = bool(res.value.atomic) if gate else None


class _TreeState:
    """The tree being built: nodes in creation order, the passages behind each node, the drops."""

    def __init__(self, tree_id: str, seed: Seed, corpus_hash: str, max_nodes: int):
        self.tree_id, self.seed, self.corpus_hash, self.max_nodes = tree_id, seed, corpus_hash, max_nodes
        self.nodes: dict[str, EvidenceNode] = {}
        self.snippets: dict[str, list[Snippet]] = {}
        self.dropped: list[dict[str, Any]] = []
        self.vectors: dict[str, np.ndarray] = {}  # query embeddings, for the redundancy check and the passage gate
        self.passage_vectors: dict[str, np.ndarray] = {}  # passage id -> embedding, for the passage gate
        self.gated: list[dict[str, Any]] = []  # passages the gate kept out
        self.claimed: set[str] = set()  # passages held by a node or promised to a child being grounded
        self.invalid_answers = 0

    def failed(self, res: LLMResult) -> bool:
        """True when the call gave no valid answer; an invalid one (not a provider failure, which fails the
        whole tree) is counted."""
        if res.ok and res.value is not None:
            return False
        self.invalid_answers += not res.transient
        return True

    def budget(self) -> int:
        """Nodes this tree may still add."""
        return self.max_nodes - len(self.nodes)

    def add(self, query: str, *, parent: EvidenceNode | None, snippets: list[Snippet]) -> EvidenceNode:
        node = EvidenceNode(id=f"n{len(self.nodes)}", query=query, parent_id=parent.id if parent else None,
                            depth=parent.depth + 1 if parent else 0, passage_ids=[s.passage_id for s in snippets])
        self.nodes[node.id] = node
        self.snippets[node.id] = snippets
        self.claimed.update(s.passage_id for s in snippets)
        if parent is not None:
            parent.children.append(node.id)
        return node

    def path(self, node_id: str) -> list[str]:
        out: list[str] = []
        current: str | None = node_id
        while current is not None:
            out.append(current)
            current = self.nodes[current].parent_id
        return out[::-1]

    def drop(self, child: _Child, reason: str, detail: str) -> None:
        self.dropped.append({"query": child.query, "parent_id": child.parent.id, "depth": child.parent.depth + 1,
                             "reason": reason, "detail": detail})

    def tree(self) -> EvidenceTree:
        return EvidenceTree(id=self.tree_id, seed_passage_id=self.seed.passage_id, seed_title=self.seed.title,
                            topic=self.seed.topic, root_id="n0", nodes=self.nodes, dropped=self.dropped,
                            gated=self.gated,
                            corpus_hash=self.corpus_hash, invalid_answers=self.invalid_answers)
