"""The data model every stage reads and writes (pydantic v2).

Corpus side: :class:`Passage`, :class:`Snippet`.
Evidence-tree pipeline (DeepRubric §3.1–3.2): :class:`EvidenceStatement`, :class:`EvidenceNode`,
:class:`EvidenceTree`, :class:`Criterion`, :class:`Candidate`, :class:`Verification`,
:class:`Example`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    """Base for stored records: unknown fields are errors, so typos in data surface early."""

    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- corpus


class Passage(Record):
    """One retrievable unit of a corpus (a whole short document or a chunk of a long one)."""

    id: str
    text: str
    title: str = ""
    doc_id: str = ""  # the document it came from; ``browse`` returns the whole document
    metadata: dict[str, Any] = Field(default_factory=dict)  # e.g. description, topic, url


class Snippet(Record):
    """What a tool call returned, kept in the snippet store so citations can be resolved later."""

    id: str  # stable: the same passage gets the same snippet id in every call
    passage_id: str
    doc_id: str = ""
    title: str = ""
    text: str
    url: str = ""  # the document's url (``metadata.url``) when the corpus has one
    score: float | None = None
    tool: Literal["search", "scholar", "browse"] = "search"
    query: str = ""


# ---------------------------------------------------------------- evidence trees


class EvidenceStatement(Record):
    """An atomic factual statement extracted from one passage (Fig. 10)."""

    text: str
    passage_id: str


class EvidenceNode(Record):
    id: str
    query: str
    parent_id: str | None = None
    depth: int = 0
    children: list[str] = Field(default_factory=list)
    passage_ids: list[str] = Field(default_factory=list)
    statements: list[EvidenceStatement] = Field(default_factory=list)
    atomic: bool | None = None  # the gating call's verdict; atomic nodes are not expanded
    facet: str = ""
    notes: list[str] = Field(default_factory=list)  # failed calls at this node (recorded, never filled in)


class EvidenceTree(Record):
    id: str
    seed_passage_id: str
    seed_title: str
    topic: str = ""
    root_id: str
    nodes: dict[str, EvidenceNode]
    dropped: list[dict[str, Any]] = Field(default_factory=list)  # children dropped, with reasons
    corpus_hash: str = ""

    def leaves(self) -> list[EvidenceNode]:
        return [n for n in self.nodes.values() if not n.children and n.id != self.root_id]


# ---------------------------------------------------------------- rubrics and examples


class Criterion(Record):
    """One rubric criterion (Fig. 11). ``weight`` may be negative for debunking criteria."""

    id: str
    type: Literal["factual", "logical"]
    description: str
    weight: float
    source_leaf_ids: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    passage_ids: list[str] = Field(default_factory=list)  # resolved from the evidence by rule checks
    title: str = ""


class Candidate(Record):
    """A query–rubric candidate from the bottom-up merge, before verification."""

    id: str
    tree_id: str
    rubric_source: Literal["tree", "closed-book", "search"] = "tree"
    question: str
    selected_leaf_ids: list[str] = Field(default_factory=list)
    selection_trace: Any = None
    merge_trace: Any = None
    tree_cut: dict[str, Any] = Field(default_factory=dict)  # what the serialization limits left out
    rubrics: list[Criterion] = Field(default_factory=list)
    rule_failures: list[str] = Field(default_factory=list)  # empty = passed the deterministic checks
    generation_error: str | None = None  # set when the generator's output could not be read
    raw: str | None = None  # the generator's text when unreadable


class Verification(Record):
    """The verifier's audit (Fig. 12). ``decision`` is UNPARSEABLE when its output could not be read."""

    candidate_id: str
    decision: Literal["KEEP", "REVISE", "DROP", "UNPARSEABLE"]
    error_tags: list[str] = Field(default_factory=list)
    major_issues: list[str] = Field(default_factory=list)
    justification: str = ""
    fix_plan: Any = None
    revised_question: str | None = None
    revised_rubrics: list[Criterion] | None = None
    rule_failures: list[str] = Field(default_factory=list)  # of the revised rubrics
    implementation_guidance: Any = None
    raw: str | None = None  # the verifier's text when unparseable


class Provenance(Record):
    tree_id: str
    leaf_ids: list[str]
    passage_ids: list[str]
    corpus_hash: str
    models: dict[str, str]  # role -> model name
    prompt_hashes: dict[str, str]  # prompt template name -> content hash


class Example(Record):
    """One row of the exported dataset: the final question and rubrics with their provenance."""

    id: str
    question: str
    rubrics: list[Criterion]
    decision: Literal["KEEP", "REVISE", "DROP", "UNPARSEABLE"]
    rubric_source: Literal["tree", "closed-book", "search"] = "tree"
    topic: str = ""
    provenance: Provenance
