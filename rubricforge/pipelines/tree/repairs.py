"""Deterministic repairs of a query–rubric candidate, made before the rule checks (issue 34; DeepRubric §C.4).

DeepRubric's strong verifier revises 91.5 % of candidates, and its Table 7 sorts the revisions into structural
categories. A small verifier answers REVISE and revises nothing, so what can be decided without a model is
repaired here, for every backend, and each repair is a :class:`~rubricforge.schema.Repair` record in the
candidate (``Candidate.repairs``, also appended to its ``merge_trace``) or in the verdict of a revision
(``Verification.repairs``), with its Table 7 category. The repairs, in the order they run:

1. **Negative weight** (*Negative-weight rubric removal*): a rubric with a weight below 0 is removed unless it is
   factual and its evidence traces to a statement of its source leaves (Fig. 12: negative weights are problematic
   "unless explicitly justified"; the justification we accept is the evidence of what it debunks).
2. **Prompt example** (*Entity / domain / time mismatch*): a rubric that matches an example quoted in a prompt the
   generator or verifier sees (:data:`PROMPT_NAMES`; content-word overlap at least ``rules.DUPLICATE_OVERLAP``, or
   equal) or that holds a placeholder (``<...>``, ``...``) is removed: the 1.5B copied "States that the Eiffel Tower
   was completed in 1889 for the World's Fair" into a prime-number row, its names foreign to the tree.
3. **Support** of a factual rubric by its evidence: its *claim* (the description less the rubric frame words of
   :data:`FRAME`, the stop words and ``rules.GENERIC``) must be found in the statements its evidence traces to
   (``rules.EVIDENCE_MATCH``): every number exactly (thousands commas dropped), every name (a capitalised word
   after the first, possessive dropped) as a word of the statements, every other content word by stem
   (:func:`stem`: a few English suffixes stripped, then ``rules``' matching: equal, a shared 5-letter prefix, or
   difflib ratio 0.85); a paraphrase may leave one content word unfound per :data:`PARAPHRASE_WORDS` claim words (a
   claim of 1–3 words none, of 4–7 one, of 8–11 two: "roughly a third of the crops people eat" for "about one third
   of the crops humans eat"). A rubric with more words not found is rewritten from its span ("States that" + the statement,
   at most :data:`MAX_REWRITE_WORDS` words) or, when the statement is longer, removed. The category is *Entity /
   domain / time mismatch* when a name or a number is missing, else *Evidence sufficiency / grounding*.
4. **Off topic** (*Question–rubric mismatch*): a factual rubric (description and evidence) whose embedding's cosine
   with the question and with the tree's root query are both below :data:`OFF_TOPIC_COSINE` is removed.
5. **Foreign names** in a logical rubric (*Entity / domain / time mismatch*): a logical rubric naming a name or a
   number that neither the question, the root query nor the remaining factual rubrics and their evidence hold is
   removed (the comparison of the prime number theorem "with the Eiffel Tower").
6. **Duplicates by meaning** (*Rubric design / granularity*): two rubrics whose description embeddings have cosine
   at least :data:`DUPLICATE_COSINE`, or two logical rubrics that relate the same things (their content words less
   the reasoning verbs of :data:`LOGICAL_FRAME` overlap at least ``rules.DUPLICATE_OVERLAP``: "Compares / Explains
   how … differ / Distinguishes the appearance and behavior of moths from those of the geometer moths"), count
   once: the later one is removed (a logical one before a factual one). The candidate then needs
   ``build.min_rubrics`` distinct rubrics to pass the rule checks.

A question narrowed by the stepwise merge (its uncovered clauses left out, :mod:`.synthesis`) is recorded as a
*Question scope / merge overreach* repair. Every repair removes or rewrites what the candidate holds; none adds a
fact that its evidence does not state.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import numpy as np

from rubricforge.pipelines.prompting import template
from rubricforge.pipelines.tree.rules import (DUPLICATE_OVERLAP, EVIDENCE_MATCH, GENERIC, STOPWORDS, Embed, Pool,
                                              best_statement, content_words, evidence_pool, support)
from rubricforge.schema import Candidate, Criterion, EvidenceTree, Repair, RepairCategory
from rubricforge.text import clip

DUPLICATE_COSINE = 0.9
OFF_TOPIC_COSINE = 0.3
MAX_REWRITE_WORDS = 40
PARAPHRASE_WORDS = 4  # a paraphrase may leave one content word unfound per this many claim words
# the templates whose quoted examples a rubric must not repeat: what the generator and the verifier see
PROMPT_NAMES = ("merge", "merge_select", "merge_question", "merge_criterion", "merge_logical", "verify",
                "verify_recheck", "verify_norevision")
# what a rubric says about the answer, not about the world: its verbs and their adverbs
FRAME = frozenset("state stated mention mentioned identify identified note noted explain explained describe described "
                  "give provide provided list cite discuss discussed report reported quantify specify define outline "
                  "summarize summarise highlight recognize recognise acknowledge indicate emphasize answer response "
                  "correctly accurately clearly known called referred".split())
LOGICAL_FRAME = FRAME | frozenset("compare compared comparing distinguish distinguished distinguishing differ "
                                  "differed difference similarity similar contrast contrasting relate related relation "
                                  "relationship".split())

GROUNDING: RepairCategory = "Evidence sufficiency / grounding"
ENTITY: RepairCategory = "Entity / domain / time mismatch"
MISMATCH: RepairCategory = "Question–rubric mismatch"
SCOPE: RepairCategory = "Question scope / merge overreach"
NEGATIVE: RepairCategory = "Negative-weight rubric removal"
GRANULARITY: RepairCategory = "Rubric design / granularity"
CATEGORIES: tuple[RepairCategory, ...] = (MISMATCH, GROUNDING, SCOPE, NEGATIVE, GRANULARITY, ENTITY)  # Table 7's order

_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ie", "es", "ed", "ly", "s")
_TOKEN = re.compile(r"\d[\d,.]*\d|\d|[A-Za-z][A-Za-z'’]*")
_PLACEHOLDER = re.compile(r"<[^<>]*>|\.\.\.|…")


# ---------------------------------------------------------------- words, names and numbers


def stem(word: str) -> str:
    """A lemma-ish stem: the first of :data:`_SUFFIXES` that leaves 3+ letters stripped (``ie…`` -> ``y``)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix.startswith("ie") else "")
    return word


def _plain(word: str) -> str:
    return re.sub(r"['’]s?$", "", word.lower())


def names_and_numbers(text: str) -> tuple[list[str], list[str]]:
    """The text's names (capitalised words after its first word, stop words and frame words aside; lower-cased,
    possessive dropped) and numbers (thousands commas dropped)."""
    names, numbers = [], []
    for i, token in enumerate(_TOKEN.findall(text)):
        if token[0].isdigit():
            numbers.append(token.replace(",", "").rstrip("."))
        elif i > 0 and token[0].isupper() and (plain := _plain(token)) not in STOPWORDS and plain not in FRAME:
            names.append(plain)
    return names, numbers


def _vocabulary(texts: list[str]) -> tuple[set[str], set[str], str]:
    """Plain words, numbers and content-word stems (as one text) of ``texts``."""
    joined = " ".join(texts)
    words = {_plain(t) for t in _TOKEN.findall(joined) if not t[0].isdigit()}
    numbers = {t.replace(",", "").rstrip(".") for t in _TOKEN.findall(joined) if t[0].isdigit()}
    return words, numbers, " ".join(dict.fromkeys(stem(w) for w in content_words(joined)))


@cache
def _stems(words: frozenset[str]) -> frozenset[str]:
    return frozenset(stem(w) for w in words)


def claim_words(description: str, frame: frozenset[str] = FRAME) -> list[str]:
    """The content words of a rubric that make its claim (no frame, generic or number words)."""
    return [w for w in content_words(description)
            if stem(w) not in _stems(frame) and w not in GENERIC and not w[0].isdigit()]


def unsupported(description: str, spans: list[str]) -> tuple[list[str], bool]:
    """The words of ``description`` that ``spans`` do not hold, when they make it unsupported (any name or number;
    content words beyond one per :data:`PARAPHRASE_WORDS`), and whether one of them is a name or a number."""
    words, numbers, stems = _vocabulary(spans)
    names, nums = names_and_numbers(description)
    missing_names = [n for n in dict.fromkeys(names) if n not in words and n.rstrip("s") not in words]
    missing_numbers = [n for n in dict.fromkeys(nums) if n not in numbers]
    named = set(missing_names)
    claim = list(dict.fromkeys(claim_words(description)))
    missing_words = [w for w in claim if w not in named and not _found(stem(w), stems)]
    if not (missing_names or missing_numbers) and len(missing_words) <= len(claim) // PARAPHRASE_WORDS:
        return [], False
    return missing_names + missing_numbers + missing_words, bool(missing_names or missing_numbers)


def _found(word: str, stems: str) -> bool:
    return not content_words(word) or support(word, stems) == 1.0


def _overlap(a: str, b: str) -> float:
    """The rule checks' duplicate measure on two texts' content-word sets (matched words of both over all)."""
    wa, wb = " ".join(sorted(set(content_words(a)))), " ".join(sorted(set(content_words(b))))
    na, nb = len(wa.split()), len(wb.split())
    return (support(wa, wb) * na + support(wb, wa) * nb) / (na + nb) if na + nb else 0.0


# ---------------------------------------------------------------- prompt examples


@cache
def prompt_examples() -> tuple[str, ...]:
    """The quoted sentences (4+ words, no placeholder) of the templates of :data:`PROMPT_NAMES`."""
    quoted = (q for name in PROMPT_NAMES for q in re.findall(r'"([^"\n]+)"', template(name)))
    return tuple(q for q in dict.fromkeys(quoted) if len(q.split()) >= 4 and not re.search(r"[{}<>]|\.\.\.|…", q))


def copied_example(description: str) -> str | None:
    """Why ``description`` repeats a prompt's example or placeholder, or None."""
    if match := _PLACEHOLDER.search(description):
        return f"holds the placeholder '{match.group(0)}' of a prompt example"
    normal = " ".join(description.lower().split())
    for example in prompt_examples():
        if normal == " ".join(example.lower().split()) or _overlap(description, example) >= DUPLICATE_OVERLAP:
            return f"repeats the prompt example '{clip(example, 80)}'"
    return None


# ---------------------------------------------------------------- the repairs


def rewritten(span: str) -> str | None:
    """A factual rubric that states exactly ``span`` ("States that ..."), or None when the span is too long."""
    text = " ".join(span.split()).rstrip(" .;:")
    words = text.split()
    if not words or len(words) > MAX_REWRITE_WORDS:
        return None
    if words[0].lower() in STOPWORDS and words[0][1:].islower():
        text = words[0].lower() + text[len(words[0]):]
    return f"States that {text}."


def _spans(rubric: Criterion, pool: Pool) -> list[str]:
    """The statements of the rubric's source leaves that its evidence traces to."""
    statements = [s for sid in rubric.source_leaf_ids for s in pool.get(sid, [])]
    spans = []
    for evidence in (e for e in rubric.evidence if e.strip()):
        match, score = best_statement(evidence, statements)
        if match is not None and score >= EVIDENCE_MATCH:
            spans.append(match.text)
    return list(dict.fromkeys(spans))


class _Pass:
    """One pass of the repairs over a list of rubrics (see :func:`repair_rubrics`)."""

    def __init__(self, question: str, root: str, pool: Pool | None, embed: Embed | None):
        self.question, self.root, self.pool, self.embed = question, root, pool, embed
        self.repairs: list[Repair] = []

    def _log(self, rubric: Criterion, category: RepairCategory, reason: str, after: str = "") -> None:
        self.repairs.append(Repair(target=rubric.id, action="rewritten" if after else "removed", category=category,
                                   reason=reason, before=rubric.description, after=after))

    def run(self, rubrics: list[Criterion]) -> list[Criterion]:
        kept = [r for r in rubrics if self._weight_ok(r) and self._not_copied(r)]
        kept = [r for r in (self._supported(r) for r in kept) if r is not None]
        kept = self._on_topic(kept)
        kept = [r for r in kept if self._names_known(r, kept)]
        return self._distinct(kept)

    def _weight_ok(self, rubric: Criterion) -> bool:
        if rubric.weight >= 0 or (rubric.type == "factual" and self.pool is not None and _spans(rubric, self.pool)):
            return True
        self._log(rubric, NEGATIVE, f"negative weight {rubric.weight} without evidence of what it debunks")
        return False

    def _not_copied(self, rubric: Criterion) -> bool:
        if (why := copied_example(rubric.description)) is None:
            return True
        self._log(rubric, ENTITY, why)
        return False

    def _supported(self, rubric: Criterion) -> Criterion | None:
        if rubric.type != "factual" or rubric.weight < 0 or self.pool is None:
            return rubric
        spans = _spans(rubric, self.pool)
        if not spans:
            return rubric  # evidence that traces to no statement: the rule checks report it
        missing, named = unsupported(rubric.description, spans)
        if not missing:
            return rubric
        category = ENTITY if named else GROUNDING
        why = f"claims what its evidence does not state ({', '.join(missing[:6])})"
        span = max(spans, key=lambda s: support(rubric.description, s))
        if (text := rewritten(span)) is None:
            self._log(rubric, category, f"{why}; its evidence is over {MAX_REWRITE_WORDS} words to restate")
            return None
        self._log(rubric, category, f"{why}; rewritten from its evidence", after=text)
        return rubric.model_copy(update={"description": text, "evidence": [span]})

    def _vectors(self, texts: list[str]) -> np.ndarray:
        assert self.embed is not None
        return self.embed(texts)

    def _on_topic(self, rubrics: list[Criterion]) -> list[Criterion]:
        factual = [r for r in rubrics if r.type == "factual"]
        if self.embed is None or not factual:
            return rubrics
        vectors = self._vectors([self.question, self.root, *(" ".join([r.description, *r.evidence]) for r in factual)])
        similarity = vectors[2:] @ vectors[:2].T
        off: list[Criterion] = []
        for rubric, (to_question, to_root) in zip(factual, similarity, strict=True):
            if max(to_question, to_root) < OFF_TOPIC_COSINE:
                off.append(rubric)
                self._log(rubric, MISMATCH, f"off topic: cosine {to_question:.2f} with the question and {to_root:.2f} "
                                            f"with the root query (< {OFF_TOPIC_COSINE})")
        return [r for r in rubrics if not any(r is o for o in off)]

    def _names_known(self, rubric: Criterion, kept: list[Criterion]) -> bool:
        if rubric.type != "logical":
            return True
        context = [self.question, self.root, *(t for r in kept if r.type == "factual" for t in [r.description, *r.evidence])]
        words, numbers, _ = _vocabulary(context)
        names, nums = names_and_numbers(rubric.description)
        foreign = [n for n in names if n not in words and n.rstrip("s") not in words] + [n for n in nums if n not in numbers]
        if not foreign:
            return True
        self._log(rubric, ENTITY, f"names what neither the question nor its facts name ({', '.join(foreign[:6])})")
        return False

    def _distinct(self, rubrics: list[Criterion]) -> list[Criterion]:
        if len(rubrics) < 2:
            return rubrics
        vectors = self._vectors([r.description for r in rubrics]) if self.embed is not None else None
        order = sorted(range(len(rubrics)), key=lambda i: rubrics[i].type != "factual")  # factual ones first
        kept: list[int] = []
        for i in order:
            why = next((w for j in kept if (w := _same_meaning(rubrics[i], rubrics[j], vectors, i, j))), None)
            if why is None:
                kept.append(i)
            else:
                self._log(rubrics[i], GRANULARITY, why)
        return [rubrics[i] for i in sorted(kept)]


def _same_meaning(a: Criterion, b: Criterion, vectors: np.ndarray | None, i: int, j: int) -> str | None:
    """Why rubric ``a`` (row ``i`` of ``vectors``) restates ``b`` (row ``j``), or None."""
    if vectors is not None and (cosine := float(vectors[i] @ vectors[j])) >= DUPLICATE_COSINE:
        return f"restates {b.id} (cosine {cosine:.2f} >= {DUPLICATE_COSINE})"
    if a.type == b.type == "logical":
        wa, wb = claim_words(a.description, LOGICAL_FRAME), claim_words(b.description, LOGICAL_FRAME)
        if wa and wb and _overlap(" ".join(wa), " ".join(wb)) >= DUPLICATE_OVERLAP:
            return f"relates the same things as {b.id} ({', '.join(dict.fromkeys(wa))})"
    return None


def repair_rubrics(question: str, root: str, rubrics: list[Criterion], pool: Pool | None,
                   embed: Embed | None) -> tuple[list[Criterion], list[Repair]]:
    """The rubrics after the repairs of the module docstring, and the repairs made (``pool`` None: closed-book,
    no evidence checks; ``embed`` None: no embedding checks)."""
    repair = _Pass(question, root, pool, embed)
    return repair.run(rubrics), repair.repairs


def meaning_duplicates(rubrics: list[Criterion], embed: Embed | None) -> list[str]:
    """Why the last of ``rubrics`` restates an earlier one (repair 6), as rule-check style failures."""
    if len(rubrics) < 2:
        return []
    vectors = embed([r.description for r in rubrics]) if embed is not None else None
    new, n = rubrics[-1], len(rubrics) - 1
    return [f"{new.id} {why}" for j, old in enumerate(rubrics[:-1])
            if (why := _same_meaning(new, old, vectors, n, j)) is not None]


def _narrowed(trace: Any) -> list[Repair]:
    """The stepwise merge's narrowed question (a trace entry with ``narrowed``) as a repair record."""
    if not isinstance(trace, list):
        return []
    out, before = [], ""
    for entry in trace:
        if isinstance(entry, dict) and entry.get("step") == "question":
            if entry.get("narrowed"):
                out.append(Repair(target="question", action="rewritten", category=SCOPE, before=before,
                                  after=str(entry.get("output", "")),
                                  reason="clauses no rubric checks left out: " + "; ".join(map(str, entry.get("rejected", [])))))
            before = str(entry.get("output", ""))
    return out


def repair_candidate(candidate: Candidate, tree: EvidenceTree, embed: Embed | None) -> None:
    """Repair a tree candidate in place: its rubrics, ``repairs`` and, for each repair, an entry of its merge trace.
    The ablation's candidates (closed-book, search) are left as generated: §4.4 measures those rubric sources."""
    if candidate.generation_error is not None or candidate.rubric_source != "tree":
        return
    pool, _ = evidence_pool(candidate, tree)
    candidate.rubrics, repairs = repair_rubrics(candidate.question, tree.nodes[tree.root_id].query,
                                                candidate.rubrics, pool, embed)
    candidate.repairs = _narrowed(candidate.merge_trace) + repairs
    if repairs:
        trace = candidate.merge_trace
        entries = trace if isinstance(trace, list) else ([] if trace is None else [trace])
        candidate.merge_trace = [*entries, *({"step": "repair", **r.model_dump()} for r in repairs)]


def pending_repairs(candidate: Candidate, tree: EvidenceTree, embed: Embed | None) -> list[str]:
    """What the repairs would still change in a tree candidate (empty: it passes every deterministic repair)."""
    if candidate.rubric_source != "tree":
        return []
    pool, _ = evidence_pool(candidate, tree)
    _, repairs = repair_rubrics(candidate.question, tree.nodes[tree.root_id].query,
                                [r.model_copy(deep=True) for r in candidate.rubrics], pool, embed)
    return [f"{r.target}: {r.reason} ({r.category})" for r in repairs]


def count_repairs(repairs: list[Repair]) -> dict[str, dict[str, int]]:
    """Repairs by Table 7 category and action, every category listed."""
    counts: dict[str, dict[str, int]] = {c: {"rewritten": 0, "removed": 0} for c in CATEGORIES}
    for r in repairs:
        counts[r.category][r.action] += 1
    return counts
