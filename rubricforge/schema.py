"""The data model every stage reads and writes (pydantic v2).

Corpus side: :class:`Passage`, :class:`Snippet`.
Evidence-tree pipeline (DeepRubric §3.1–3.2): :class:`EvidenceStatement`, :class:`EvidenceNode`,
:class:`EvidenceTree`, :class:`Criterion`, :class:`Candidate`, :class:`Verification`,
:class:`Example`.
Knowledge-graph pipeline (MindDR §4.1, §4.5, §4.6): :class:`KGEdge`, :class:`KGPath`,
the stage records :class:`KGExtraction`, :class:`KGQuestion`, :class:`KGFilterResults`,
:class:`KGLongform`; :class:`RaceCriterion`, :class:`RaceRubrics`, :class:`KGExample`.
Preference data (Prefs §3.2, §4.1): :class:`PreferencePair`.
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
    """An atomic factual statement from one passage: written by the extractor (Fig. 10, no offsets) or a
    sentence it selected, then ``text == passage.text[start:end]``."""

    text: str
    passage_id: str
    start: int | None = None  # character offsets in the passage text, when the statement is an exact span
    end: int | None = None


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
    # retrieved passages the passage gate kept out (build.passage_gate): query, passage_id, title, both cosines
    gated: list[dict[str, Any]] = Field(default_factory=list)
    corpus_hash: str = ""
    # structured calls whose answer stayed invalid after the re-prompts: each cut something (a node's
    # statements, a child, a subtree); such a tree is built again on resume (build.invalid_answer_retries)
    invalid_answers: int = 0
    attempt: int = 0  # 0 for the first build; a rebuild samples the calls the cache cannot answer anew

    def leaves(self) -> list[EvidenceNode]:
        return [n for n in self.nodes.values() if not n.children and n.id != self.root_id]


# ---------------------------------------------------------------- rubrics and examples


class Criterion(Record):
    """One rubric criterion (Fig. 11). ``weight`` may be negative for debunking criteria. ``type`` is None for
    rubrics written as ``{title, description, weight}`` (DR Tulu, Prefs, HealthBench, HOTE)."""

    id: str
    type: Literal["factual", "logical"] | None = None
    description: str
    weight: float
    source_leaf_ids: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    passage_ids: list[str] = Field(default_factory=list)  # resolved from the evidence by rule checks
    title: str = ""


RepairCategory = Literal["Question–rubric mismatch", "Evidence sufficiency / grounding", "Question scope / merge overreach",
                         "Negative-weight rubric removal", "Rubric design / granularity",
                         "Entity / domain / time mismatch"]  # DeepRubric Table 7's revision reasons


class Repair(Record):
    """One deterministic repair of a candidate or a revision (:mod:`rubricforge.pipelines.tree.repairs`)."""

    target: str  # a rubric id, or "question"
    action: Literal["rewritten", "removed"]
    category: RepairCategory
    reason: str
    before: str
    after: str = ""  # the rewritten text (empty when removed)


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
    repairs: list[Repair] = Field(default_factory=list)  # deterministic repairs made before the rule checks
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
    repairs: list[Repair] = Field(default_factory=list)  # deterministic repairs of the revision
    implementation_guidance: Any = None
    raw: str | None = None  # the verifier's text when unparseable
    rejected_revisions: list[dict[str, Any]] = Field(default_factory=list)  # earlier answers whose revision failed


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


# ---------------------------------------------------------------- knowledge-graph multi-hop tasks


class KGEdge(Record):
    """One graph edge: ``head --relation--> tail`` as stated by one passage."""

    head: str  # node ids
    relation: str
    tail: str
    passage_id: str
    evidence: str = ""  # the sentence (or extracted statement) that states it
    # "llm": extracted by the LLM and verified against its sentence; "text": a relation one sentence states
    # between two names (no LLM); "link": the corpus's link structure ("mentions"), never a hop
    source: Literal["llm", "text", "link"] = "llm"


class KGPath(Record):
    """A sampled subgraph: one chain (``branches`` has one item) or several chains that meet at the
    answer. Each branch lists node ids from its visible start entity to the answer."""

    id: str
    shape: Literal["chain", "branch"]
    branches: list[list[str]]
    edges: list[KGEdge]  # one per hop, branch by branch
    answer: str
    hops: int
    names: dict[str, str] = Field(default_factory=dict)  # node id -> display name
    descriptions: dict[str, str] = Field(default_factory=dict)  # node id -> short description, when known
    passage_ids: list[str] = Field(default_factory=list)

    def starts(self) -> list[str]:
        return [b[0] for b in self.branches]

    def intermediates(self) -> list[str]:
        return [n for b in self.branches for n in b[1:-1]]

    def hop(self, a: str, b: str) -> KGEdge:
        """The edge between consecutive nodes ``a`` and ``b`` of a branch, whichever way it points."""
        return next(e for e in self.edges if {e.head, e.tail} == {a, b})


class KGTriple(Record):
    head: str
    relation: str
    tail: str


class KGExtraction(Record):
    """``kg_extractions.jsonl``: one passage's grounded and ungrounded triples, or the failed call's error."""

    passage_id: str
    triples: list[KGTriple] = Field(default_factory=list)
    ungrounded: list[KGTriple] = Field(default_factory=list)
    error: str | None = None


class KGQuestion(Record):
    """``kg_questions.jsonl``: a subgraph's initial, obfuscated and final question, or why it was dropped."""

    initial: str | None = None
    obfuscated: str | None = None
    question: str | None = None  # the final question
    undone: list[str] = Field(default_factory=list)  # "<stage>: <check it failed>" for each step not kept
    obfuscated_ok: bool | None = None  # no start entity named
    drop: str | None = None


class KGFilterResults(Record):
    """``kg_filters.jsonl``: each filter's result that ran, the drop reason (or None) and whether the answer's
    passage came back from one search (None when that filter did not run)."""

    results: dict[str, dict[str, Any]] = Field(default_factory=dict)
    drop: str | None = None
    answer_passage_retrieved: bool | None = None


class RaceCriterion(Record):
    criterion: str
    explanation: str = ""
    weight: float


class RaceRubrics(Record):
    """RACE rubrics (MindDR App. 8.1): dimension weights (summing to 1) and weighted criteria."""

    query: str
    dimension_weight: dict[str, float]
    criterions: dict[str, list[RaceCriterion]]


class KGLongform(Record):
    """``kg_longform.jsonl``: a retained question's research query with RACE rubrics, or the error."""

    race: RaceRubrics | None = None
    error: str | None = None
    raw_weights: dict[str, Any] | None = None  # the model's dimension weights before normalisation


class KGExample(Record):
    """One retained knowledge-graph task: a multi-hop question with its answer, key entity set,
    difficulty and subgraph, plus an optional long-form research variant with RACE rubrics."""

    id: str
    question: str
    answer: str
    answer_aliases: list[str]
    key_entities: list[str]  # names of every subgraph entity, answer included (the PRM entity set)
    hops: int
    shape: Literal["chain", "branch"]
    difficulty: Literal["easy", "medium", "hard"]
    difficulty_factors: dict[str, Any] = Field(default_factory=dict)
    path: KGPath
    research_query: str = ""
    race_rubrics: RaceRubrics | None = None
    corpus_hash: str = ""
    models: dict[str, str] = Field(default_factory=dict)
    prompt_hashes: dict[str, str] = Field(default_factory=dict)


# ---------------------------------------------------------------- preference pairs (Prefs)


class PreferencePair(Record):
    """One (query, chosen report, rejected report) triple (Prefs §3.2 Stage 3; docs/methods.md Q-1).

    ``report_chosen`` is r_acc, ``report_rejected`` r_rej (final report text, no tool trace). ``split`` is
    assigned topic-balanced 8:1:1 on import unless the file gives it. ``degradation`` says how a synthetic
    pair was made (``rubricforge prefs degrade``: the rejected report is the chosen one after a controlled
    degradation, e.g. ``facts``); None for pairs labelled by people (``annotator``) or a judge."""

    id: str
    query: str = Field(min_length=1)
    topic: str = ""
    language: Literal["en", "zh"] = "en"
    report_chosen: str = Field(min_length=1)
    report_rejected: str = Field(min_length=1)
    split: Literal["train", "validation", "test"] = "test"
    sources: dict[str, str] = Field(default_factory=dict)  # {"chosen": model, "rejected": model}
    annotator: str | None = None
    degradation: str | None = None
