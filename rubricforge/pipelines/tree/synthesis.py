"""Stage 2: bottom-up merge and query–rubric co-generation from an evidence tree (DeepRubric §3.2, Fig. 11).

Two modes (``build.merge``; ``auto`` = stepwise for the embedded models, single for any other):

* **single** (the paper): the tree is serialized compactly (:mod:`.serialize`) and appended to the
  verbatim Fig. 11 prompt; the generator returns ``{question, selected_leaf_ids, selection_trace,
  merge_trace, rubrics}``. The output model is strict where the rule checks need it (rubric type,
  description, weight, ids, evidence: the shared :class:`~rubricforge.rubric_gen.criteria.RubricOut`) and
  tolerant where the paper is free-form (the two traces).
* **stepwise** (for small models, which loop inside one large answer): Fig. 11's tasks as separate
  short calls — (1) select 2–4 leaves (the grammar allows only ids of leaves with evidence), (2) write
  the question from the selected leaves, (3) one factual rubric per selected leaf, its evidence chosen
  by id from that leaf's statements (so evidence is always a statement verbatim), (4) the logical
  rubrics, as many as ``build.min_rubrics`` still needs (at least 2), one per call, each of one kind of
  :data:`LOGICAL_KINDS` whose shape the grammar keeps. Importance is ``high`` /
  ``medium`` / ``low`` (weights :data:`IMPORTANCE`). A rubric step whose answer repeats an earlier rubric
  or the question (the rule checks' duplicate and leak tests) is asked again, told why, up to
  :data:`STEP_RECHECKS` times; a logical rubric that still repeats is left out and one of the next kind is
  asked for in its place (at most ``len(LOGICAL_KINDS)`` replacements). A logical rubric that restates an
  earlier one by meaning (:func:`~rubricforge.pipelines.tree.repairs.meaning_duplicates`: near-identical
  embeddings, or the same things related) is left out at once, and the next kind is asked for, told which pairs
  of facts are already related. ``merge_trace`` records the steps, the rejected answers and what was left out
  and why.

Both yield the same :class:`~rubricforge.schema.Candidate`, checked by the same rules and verifier.
Nothing is filled in: too few rubrics or bad evidence are left for :mod:`.rules` to report, and an
unreadable output (in stepwise mode: of any step) becomes a candidate carrying ``generation_error``.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from rubricforge.config import Config
from rubricforge.llm.structured import Str16
from rubricforge.pipelines.prompting import render
from rubricforge.pipelines.tree.repairs import meaning_duplicates
from rubricforge.pipelines.tree.rules import (Embed, clause_failures, content_words, cut_at_bound, narrowed_question,
                                              overlap_failures, question_clauses, root_topic, vocabulary_failures)
from rubricforge.pipelines.tree.serialize import serialize_tree
from rubricforge.rubric_gen.criteria import (MAX_IDS, MAX_RUBRICS, RubricOut, Text, candidate_id, failed_candidate,
                                             to_criteria)
from rubricforge.schema import Candidate, Criterion, EvidenceNode, EvidenceTree

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

# free-form traces: any JSON a model writes here, typed so llama.cpp can still build a grammar (list[Any] fails)
FreeForm = Text | list[Text | dict[str, Any]] | dict[str, Any] | None


IMPORTANCE = {"high": 0.9, "medium": 0.6, "low": 0.3}  # stepwise mode: the weight of each importance level
Importance = Literal["high", "medium", "low"]
SELECT_MIN, SELECT_MAX = 2, 4  # stepwise: leaves selected (fewer when the tree has fewer leaves with evidence)
MIN_LOGICAL = 2  # stepwise: logical rubrics written at least
STEP_RECHECKS = 2  # stepwise: re-asks of a rubric step whose answer fails the duplicate or leak checks
QUESTION_RECHECKS = 1  # stepwise: re-asks of a question that asks what no rubric checks (rules.coverage_failures)


class MergeOutput(BaseModel):
    """The Fig. 11 answer."""

    model_config = ConfigDict(coerce_numbers_to_str=True)

    question: Text
    selected_leaf_ids: list[Str16] = Field(json_schema_extra={"maxItems": MAX_IDS})
    selection_trace: FreeForm = None
    merge_trace: FreeForm = None
    rubrics: list[RubricOut] = Field(json_schema_extra={"maxItems": MAX_RUBRICS})


def merge_messages(tree_json: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": render("merge", tree=tree_json)}]


def merge_mode(cfg: Config) -> Literal["single", "stepwise"]:
    """``build.merge``, with ``auto`` resolved: stepwise for an embedded generator model, else single."""
    from rubricforge.llm.local_model import MODELS

    if cfg.build.merge != "auto":
        return cfg.build.merge
    return "stepwise" if cfg.llm.generator.model in MODELS else "single"


async def synthesize(tree: EvidenceTree, client: LLMClient, cfg: Config, embed: Embed | None = None) -> Candidate:
    """Bottom-up merge of one tree into a question and rubrics (not yet repaired nor rule-checked; ``embed``: the
    stepwise merge leaves out a logical rubric that restates another by meaning and, with ``build.check_coverage``,
    re-asks a question whose clauses its rubrics do not check)."""
    b = cfg.build
    serialized = serialize_tree(tree, max_leaves=b.max_leaves, statements_per_leaf=b.statements_per_leaf,
                                max_chars=b.max_chars)
    if merge_mode(cfg) == "stepwise":
        return await _Stepwise(tree, client, cfg, serialized, embed).run()
    cid = candidate_id(tree.id, "tree")
    res = await client.generate("generator", merge_messages(serialized.text), output=MergeOutput, stage="merge")
    if not res.ok or res.value is None:
        failed = failed_candidate(cid, tree.id, "tree", "", res)
        failed.tree_cut = serialized.cut
        return failed
    out: MergeOutput = res.value
    question, rubrics = out.question.strip(), to_criteria(out.rubrics)
    trace = out.merge_trace
    if (ranked := ranked_weights(question, rubrics, embed)) is not None:  # recorded after the model's own trace
        trace = [*(trace if isinstance(trace, list) else [] if trace is None else [trace]), ranked]
    return Candidate(id=cid, tree_id=tree.id, rubric_source="tree", question=question,
                     selected_leaf_ids=[s.strip() for s in out.selected_leaf_ids],
                     selection_trace=out.selection_trace, merge_trace=trace,
                     tree_cut=serialized.cut, rubrics=rubrics)


# ---------------------------------------------------------------- weights that rank

FACTUAL_WEIGHTS = (1.0, 0.7)  # the fallback's weights: the most to the least question-relevant factual rubric
LOGICAL_WEIGHTS = (0.5, 0.3)  # ... and logical rubric: below every factual one (DeepRubric App. C Fig. 12, check 6)


def ranked_weights(question: str, rubrics: list[Criterion], embed: Embed | None) -> dict[str, Any] | None:
    """DeepRubric's weights are importances in [0, 1] that rank, with core factual rubrics not dominated by vague
    logical ones. When the model gave every rubric the same weight (the 1.5B says "high" for all) or a logical
    rubric outweighs every factual one, the positive weights are set here instead (in place): factual rubrics from
    1.0 down to 0.7, logical ones from 0.5 down to 0.3, each kind in the order of its similarity to the question
    (``embed``'s cosine of the description and evidence; without it, the share of the question's content words).
    Returns the trace entry (None: the model's weights stand)."""
    positive = [r for r in rubrics if r.weight > 0]
    factual = [r for r in positive if r.type == "factual"]
    logical = [r for r in positive if r.type != "factual"]
    equal = len(positive) > 1 and len({r.weight for r in positive}) == 1
    dominated = bool(logical) and max(r.weight for r in logical) > max((r.weight for r in factual), default=0.0)
    if not (equal or dominated):
        return None
    texts = [" ".join([r.description, *r.evidence]) for r in positive]
    if embed is not None:
        vectors = embed([question, *texts])
        relevance = [float(v) for v in vectors[1:] @ vectors[0]]
    else:
        asked = set(content_words(question))
        relevance = [len(asked & set(content_words(t))) / max(1, len(asked)) for t in texts]
    score = {id(r): x for r, x in zip(positive, relevance, strict=True)}
    before = {r.id: r.weight for r in positive}
    for kind, (high, low) in ((factual, FACTUAL_WEIGHTS), (logical, LOGICAL_WEIGHTS)):
        order = sorted(kind, key=lambda r: -score[id(r)])  # stable: ties keep the rubrics' order
        for rank, r in enumerate(order):
            r.weight = round(high - (high - low) * rank / max(1, len(order) - 1), 2)
    return {"step": "weights", "rule": "all weights equal" if equal else "a logical rubric outweighs every factual one",
            "before": before, "output": {r.id: r.weight for r in positive}}


# ---------------------------------------------------------------- stepwise mode


@lru_cache(maxsize=None)
def select_model(leaf_ids: tuple[str, ...], low: int, high: int) -> type[BaseModel]:
    """Step 1 answer: ``low``–``high`` ids, each one of ``leaf_ids`` (a repeated id counts once)."""
    ids = Field(json_schema_extra={"minItems": low, "maxItems": high})
    return create_model("LeafSelection", selected_leaf_ids=(list[Literal[leaf_ids]], ids))  # type: ignore[valid-type]


# Stepwise answers' text patterns. The grammar llama.cpp makes from a pattern lets any character of a class
# through, the JSON string's closing quote included, so every class leaves out '"' and '\\'.
QUESTION_PATTERN = r'^[^?\n"\\]{20,280}[?]$'  # one sentence that ends with its only question mark
FACT_PATTERN = r'^States that [^.?!\n"\\]{10,180}[.]$'  # a factual rubric states one fact of its evidence
_PHRASE = r'[^.?!\n"\\]{5,90}'
# stepwise step 4: the kinds of logical rubric, one each in turn: (kind, grammar pattern). The prompt names the kind
# and its first word, no more: a small model copies a description or an example into the rubric.
LOGICAL_KINDS = (
    ("comparison", rf"^Compares {_PHRASE} with {_PHRASE}[.]$"),
    ("cause and effect", r'^Explains (how|why) [^.?!\n"\\]{10,160}[.]$'),
    ("distinction", rf"^Distinguishes {_PHRASE} from {_PHRASE}[.]$"),
)
# A schema-only hint: the grammar makes a small model write one question, not several run together and cut off
# at the length bound; validation does not enforce it.
QuestionText = Annotated[str, Field(json_schema_extra={"pattern": QUESTION_PATTERN})]


class QuestionOut(BaseModel):
    """Step 2 answer."""

    question: QuestionText


@lru_cache(maxsize=None)
def criterion_model(evidence_ids: tuple[str, ...]) -> type[BaseModel]:
    """Step 3 answer: evidence ids only from ``evidence_ids`` (the leaf's statements), chosen first, then the
    one factual rubric that states their fact."""
    ids = Field(json_schema_extra={"minItems": 1, "maxItems": len(evidence_ids)})
    fact = Annotated[str, Field(json_schema_extra={"pattern": FACT_PATTERN})]
    return create_model("FactualCriterion", evidence_ids=(list[Literal[evidence_ids]], ids),  # type: ignore[valid-type]
                        description=(fact, ...), importance=(Importance, ...))


@lru_cache(maxsize=None)
def logical_model(fact_ids: tuple[str, ...], pattern: str) -> type[BaseModel]:
    """Step 4 answer: the two facts (of ``fact_ids``) it relates, chosen first, then one logical rubric of the shape
    ``pattern``."""
    ids = Field(json_schema_extra={"minItems": 2, "maxItems": 2})
    text = Annotated[str, Field(json_schema_extra={"pattern": pattern})]
    return create_model("LogicalCriterion", fact_ids=(list[Literal[fact_ids]], ids),  # type: ignore[valid-type]
                        description=(text, ...), importance=(Importance, ...))


class _StepFailed(Exception):
    pass


_PHRASE_BREAKS = (re.compile(r"[,;:]"), re.compile(r" (?:and|or|but|which|that|while|whereas|because) "))


def phrase_end(text: str, pattern: str) -> str | None:
    """``text`` (cut by a length bound) ended at its last whole phrase with a full stop: before its last comma,
    semicolon or colon, else before its last joining word ("and", "which", ...), when that still fits ``pattern``;
    else None."""
    body = text.rstrip(".").rstrip()
    for breaks in _PHRASE_BREAKS:
        for match in reversed(list(breaks.finditer(body))):
            whole = body[:match.start()].rstrip(" ,;:") + "."
            if re.fullmatch(pattern, whole) and not cut_at_bound(whole, pattern):
                return whole
    return None


class _Stepwise:
    """One tree's stepwise merge (see the module docstring)."""

    def __init__(self, tree: EvidenceTree, client: LLMClient, cfg: Config, serialized: Any, embed: Embed | None):
        self.tree, self.client, self.cfg, self.serialized, self.embed = tree, client, cfg, serialized, embed
        self.question_prompt = ""
        self.cid = candidate_id(tree.id, "tree")
        self.trace: list[dict[str, Any]] = []
        self.n = cfg.build.statements_per_leaf

    async def _ask(self, step: str, prompt: str, output: type[BaseModel]) -> Any:
        res = await self.client.generate("generator", [{"role": "user", "content": prompt}], output=output,
                                         stage=f"merge-{step}")
        if not res.ok or res.value is None:
            raise _StepFailed(f"stepwise merge, step '{step}': {res.error or 'no output'}")
        return res.value

    async def run(self) -> Candidate:
        tree = self.tree
        root = tree.nodes[tree.root_id].query
        with_evidence = [i for i in self.serialized.leaf_ids if tree.nodes[i].statements]
        if not with_evidence:
            return Candidate(id=self.cid, tree_id=tree.id, question="", tree_cut=self.serialized.cut,
                             generation_error="stepwise merge: no leaf has evidence statements")
        try:
            selected = await self._select(root, with_evidence)
            question = await self._question(root, selected)
            factual: list[dict[str, Any]] = []
            for leaf in selected:
                factual.append(await self._criterion(question, leaf, factual))
            logical = await self._logical(root, question, factual, len(selected))
            ids = [leaf.id for leaf in selected]
            rubrics = [Criterion(id=f"R{n}", type=c["type"], description=c["description"], weight=c["weight"],
                                 source_leaf_ids=c.get("source_leaf_ids", ids), evidence=c.get("evidence", []))
                       for n, c in enumerate(factual + logical, start=1)]
            question = await self._covered(question, rubrics)
        except _StepFailed as exc:
            return Candidate(id=self.cid, tree_id=tree.id, question="", generation_error=str(exc),
                             merge_trace=self.trace, tree_cut=self.serialized.cut)
        if (ranked := ranked_weights(question, rubrics, self.embed)) is not None:
            self.trace.append(ranked)
        return Candidate(id=self.cid, tree_id=tree.id, rubric_source="tree", question=question, selected_leaf_ids=ids,
                         selection_trace={"mode": "stepwise", "selected_leaf_ids": ids}, merge_trace=self.trace,
                         tree_cut=self.serialized.cut, rubrics=rubrics)

    async def _select(self, root: str, leaf_ids: list[str]) -> list[EvidenceNode]:
        low, high = min(SELECT_MIN, len(leaf_ids)), min(SELECT_MAX, len(leaf_ids))
        out = await self._ask("select", render("merge_select", min_leaves=low, max_leaves=high, root=root,
                                               tree=self.serialized.text), select_model(tuple(leaf_ids), low, high))
        chosen = list(dict.fromkeys(out.selected_leaf_ids))
        self.trace.append({"step": "select", "inputs": leaf_ids, "output": chosen})
        return [self.tree.nodes[i] for i in chosen]

    def _statements(self, leaf: EvidenceNode) -> list[str]:
        return [s.text for s in leaf.statements[: self.n]]

    async def _question(self, root: str, selected: list[EvidenceNode]) -> str:
        leaves = "\n".join(json.dumps({"id": leaf.id, "query": leaf.query, "evidence": self._statements(leaf)},
                                      ensure_ascii=False) for leaf in selected)
        self.question_prompt = render("merge_question", root=root, leaves=leaves)
        out = await self._ask("question", self.question_prompt, QuestionOut)
        question = out.question.strip()
        self.trace.append({"step": "question", "inputs": [leaf.id for leaf in selected], "output": question})
        return question

    async def _covered(self, question: str, rubrics: list[Criterion]) -> str:
        """The question, asked again (told which clause no rubric checks or uses the prompts' words, and what the
        rubrics check) while the rule checks' coverage or vocabulary test fails, at most :data:`QUESTION_RECHECKS`
        times; if a clause still fails, the question without those clauses
        (:func:`~rubricforge.pipelines.tree.rules.narrowed_question`) when it has one."""
        embed = self.embed
        if embed is None or not self.cfg.build.check_coverage:
            return question
        topic = root_topic(self.tree)
        for attempt in range(QUESTION_RECHECKS + 1):
            per_clause = [covered or next(iter(vocabulary_failures(clause)), None) for covered, clause in
                          zip(clause_failures(question, rubrics, embed, topic), question_clauses(question), strict=True)]
            failures = [f for f in per_clause if f is not None] or vocabulary_failures(question)
            if not failures:
                break
            if attempt == QUESTION_RECHECKS:
                narrowed = narrowed_question(question, per_clause)
                if narrowed is not None:
                    self.trace.append({"step": "question", "rejected": failures, "narrowed": True, "output": narrowed})
                    question = narrowed
                break
            checks = "".join(f"- {r.description}\n" for r in rubrics)
            prompt = (f"{self.question_prompt}\nYour question {json.dumps(question, ensure_ascii=False)} was rejected: "
                      f"{'; '.join(failures)}. The rubrics check only this:\n{checks}"
                      "Write one question that asks only about what these rubrics check.")
            question = (await self._ask("question", prompt, QuestionOut)).question.strip()
            self.trace.append({"step": "question", "rejected": failures, "output": question})
        return question

    async def _criterion(self, question: str, leaf: EvidenceNode, written: list[dict[str, Any]]) -> dict[str, Any]:
        statements = self._statements(leaf)
        labels = [f"E{i}" for i in range(1, len(statements) + 1)]
        prompt = render("merge_criterion", question=question, query=leaf.query,
                        statements="\n".join(f"[{e}] {t}" for e, t in zip(labels, statements, strict=True)))
        by_label = dict(zip(labels, statements, strict=True))

        def item(out: Any) -> dict[str, Any]:
            return {"type": "factual", "description": out.description.strip(), "weight": IMPORTANCE[out.importance],
                    "source_leaf_ids": [leaf.id], "evidence": [by_label[e] for e in dict.fromkeys(out.evidence_ids)]}

        new = await self._checked("criterion", prompt, criterion_model(tuple(labels)), item, question, written,
                                  [leaf.id], FACT_PATTERN)
        assert new is not None  # only a logical rubric is ever left out
        return new

    async def _logical(self, root: str, question: str, factual: list[dict[str, Any]], selected: int) -> list[dict[str, Any]]:
        """``build.min_rubrics`` less the factual ones (at least :data:`MIN_LOGICAL`), one call each, the kinds of
        :data:`LOGICAL_KINDS` in turn; a logical rubric's source leaves are those of the two facts it relates."""
        labels = [f"F{i}" for i in range(1, len(factual) + 1)]
        by_label = dict(zip(labels, factual, strict=True))
        facts = "\n".join(f"[{f}] {c['description'].removeprefix('States that ')}" for f, c in by_label.items())
        logical: list[dict[str, Any]] = []

        def item(out: Any) -> dict[str, Any]:
            leaves = [leaf for f in dict.fromkeys(out.fact_ids) for leaf in by_label[f]["source_leaf_ids"]]
            return {"type": "logical", "description": out.description.strip(), "weight": IMPORTANCE[out.importance],
                    "source_leaf_ids": list(dict.fromkeys(leaves)), "fact_ids": list(dict.fromkeys(out.fact_ids))}

        need = max(MIN_LOGICAL, self.cfg.build.min_rubrics - selected)
        for k in range(need + len(LOGICAL_KINDS)):  # a rubric left out as a repeat is replaced by one of the next kind
            if len(logical) == need:
                break
            kind, pattern = LOGICAL_KINDS[k % len(LOGICAL_KINDS)]
            written = "".join(f"- {c['description']} (relates {' and '.join(c['fact_ids'])})\n" for c in logical)
            prompt = render("merge_logical", root=root, facts=facts, kind=kind, start=pattern[1:].split(" ", 1)[0],
                            written=f"Logical rubrics already written:\n{written}" if written else "",
                            different=(" and different from the rubrics already written: relate another pair of "
                                       "facts when you can" if written else ""))
            new = await self._checked("logical", prompt, logical_model(tuple(labels), pattern), item,
                                      question, factual + logical, [c["description"] for c in factual], pattern)
            if new is not None:
                logical.append(new)
        for c in logical:
            del c["fact_ids"]
        return logical

    async def _checked(self, step: str, prompt: str, output: type[BaseModel], item: Any, question: str,
                       written: list[dict[str, Any]], inputs: list[str], pattern: str) -> dict[str, Any] | None:
        """One rubric, re-asked (told why) while it repeats a rubric of ``written`` or the question. One cut mid-phrase
        by its grammar's length bound (:func:`~rubricforge.pipelines.tree.rules.cut_at_bound`) ends at its last whole
        phrase (:func:`phrase_end`; the 1.5B, told it was cut, gave the same answer again), or is re-asked when it has
        none. A logical rubric that still fails after the re-asks, or that restates one by meaning, is left out (None;
        the trace says why); a factual one, the only rubric of its leaf, is kept for the repairs and the rule checks to
        judge (a cut one with no phrase to end on fails the step)."""
        for attempt in range(STEP_RECHECKS + 1):
            new = item(await self._ask(step, prompt, output))
            entry: dict[str, Any] = {"step": step, "inputs": inputs, "output": new["description"]}
            cut = []
            if cut_at_bound(new["description"], pattern):
                if (whole := phrase_end(new["description"], pattern)) is not None:
                    entry["ended_at_phrase"] = new["description"] = whole
                elif step == "logical" or attempt < STEP_RECHECKS:
                    cut.append(f"it was cut off at the length limit ('…{new['description'][-30:]}'); write a "
                               f"shorter one that ends with a whole phrase")
                else:
                    raise _StepFailed(f"stepwise merge, step '{step}': the rubric is cut at its length bound and has "
                                      f"no whole phrase to end on: '{new['description']}'")
            criteria = [Criterion(id=f"R{i}", type=c["type"], description=c["description"], weight=c["weight"])
                        for i, c in enumerate([*written, new], start=1)]
            failures = overlap_failures(question, criteria) + cut
            if step == "logical" and (same := meaning_duplicates(criteria, self.embed)):
                entry["left_out"] = failures + same
                self.trace.append(entry)
                return None
            if failures and attempt < STEP_RECHECKS:
                entry["rejected"] = failures
                prompt += (f"\nYour answer {json.dumps(new['description'], ensure_ascii=False)} was rejected: "
                           f"{'; '.join(failures)}. Write a different one.")
            elif failures and step == "logical":
                entry["left_out"] = failures
                self.trace.append(entry)
                return None
            self.trace.append(entry)
            if not failures:
                break
        return new
