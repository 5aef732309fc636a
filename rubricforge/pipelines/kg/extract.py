"""Relation extraction (MindDR §4.1 graph construction): typed triples from a slice of passages.

One structured call per passage. A triple is kept only when its head and its tail are names (a
capitalised word or a digit in them) and one sentence of the passage states it (:func:`stating_sentence`):
both names written in it (case-insensitive, whole words) and every content word of the relation (compared
by its first :data:`STEM` letters: "married" ~ "marriage"). The small embedded models invent names,
returns phrases such as "a rivalry" and relations its passage never states ("wife of" for two names of
one sentence); those are logged as ``ungrounded``. Kept triples become :class:`~rubricforge.schema.KGEdge` s
(source ``llm``) whose evidence is that sentence; canonicalisation merges their names with article titles
and with each other (:class:`~.graph.EntityResolver`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from rubricforge.llm.structured import Str40, Str60
from rubricforge.pipelines.kg.graph import FUNCTION_WORDS, EntityResolver, name_pattern, sentences
from rubricforge.pipelines.prompting import render
from rubricforge.schema import KGEdge, Passage

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

MAX_TRIPLES = 5
PASSAGE_CHARS = 1200  # of the passage shown to the extractor
STEM = 5
_NAME = re.compile(r"\b[A-Z0-9]")
_VERBS = frozenset("is was are were be been being has had have".split())


class Triple(BaseModel):
    head: Str60
    relation: Str40
    tail: Str60


class Triples(BaseModel):
    triples: list[Triple] = Field(json_schema_extra={"maxItems": MAX_TRIPLES})


def _stems(text: str) -> set[str]:
    return {w[:STEM] for w in re.findall(r"[a-z0-9]+", text.lower())}


def stating_sentence(text: str, head: str, relation: str, tail: str) -> str | None:
    """The first sentence of ``text`` that writes ``head`` and ``tail`` (case-insensitive, whole words) and every
    content word of ``relation``; None when there is none, or when the relation has no content word ("is")."""
    wanted = _stems(" ".join(w for w in relation.lower().split() if w not in FUNCTION_WORDS and w not in _VERBS))
    if not wanted:
        return None
    names = [name_pattern(n) for n in (head, tail)]
    return next((s for s in sentences(text) if all(n.search(s) for n in names) and wanted <= _stems(s)), None)


async def extract(passage: Passage, client: LLMClient, max_tokens: int) -> dict[str, Any]:
    """The log record for one passage: ``triples`` (grounded), ``ungrounded`` and ``error``."""
    text = passage.text[:PASSAGE_CHARS]
    res = await client.generate("generator", [{"role": "user", "content": render(
        "kg_extract", title=passage.title, text=text)}], output=Triples, stage="kg_extract", max_tokens=max_tokens)
    if not res.ok:
        return {"passage_id": passage.id, "triples": [], "ungrounded": [], "error": res.error}
    kept: list[dict[str, Any]] = []
    ungrounded: list[dict[str, Any]] = []
    for t in res.value.triples[:MAX_TRIPLES]:
        triple = {k: " ".join(str(v).split()) for k, v in t.model_dump().items()}
        ok = all(_NAME.search(triple[k]) for k in ("head", "tail")) and triple["head"].lower() != triple["tail"].lower()
        stated = ok and stating_sentence(passage.text, triple["head"], triple["relation"], triple["tail"])
        (kept if stated else ungrounded).append(triple)
    return {"passage_id": passage.id, "triples": kept, "ungrounded": ungrounded, "error": None}


def triple_edges(passage: Passage, triples: list[dict[str, str]], resolver: EntityResolver) -> list[KGEdge]:
    """Edges for a passage's kept triples (names resolved to canonical node ids), each with the sentence that
    states it."""
    out = []
    for t in triples:
        evidence = stating_sentence(passage.text, t["head"], t["relation"], t["tail"])
        if evidence is None:  # a triple logged before extraction checked sentences
            continue
        head, tail = resolver.resolve(t["head"]), resolver.resolve(t["tail"])
        if head is None or tail is None or head == tail:
            continue
        out.append(KGEdge(head=head, relation=t["relation"].lower(), tail=tail, passage_id=passage.id,
                          evidence=evidence[:300], source="llm"))
    return out
