"""Deterministic rule checks on a query–rubric candidate, run before any verifier call (DeepRubric §3.2).

Every failure is a readable reason string; an empty list means the candidate passed. The same
checks serve all three rubric sources: they take an *evidence pool* — source id -> statements —
built from the selected tree leaves (``tree``), from the passages retrieved with the question
(``search``), or nothing at all (``closed-book``: those rubrics are ungrounded by construction, which
is what the §4.4 ablation measures, so their source and evidence checks are skipped).

Thresholds (content words = lower-cased words and numbers minus a short stop-word list, with a
plural ``s`` stripped; two words match when equal or, for words of 5+ letters, when difflib's ratio
is at least 0.85 (organisation/organization) or they share a prefix of 5+ letters covering 80% of
the shorter word (explains/explaining)):

* ``EVIDENCE_MATCH = 0.75`` — an evidence string is traceable to a statement when at least 75% of
  its content words occur in that one statement (so quoting part of a statement, or a tight
  paraphrase, passes; a fact the statement does not contain does not).
* ``DUPLICATE_OVERLAP = 0.85`` — two criteria are duplicates when their descriptions are equal after
  normalisation or the share of their content words found in each other (matched words of both
  over all words of both) is at least 0.85.
* ``MAX_QUESTION_MARKS = 2`` — the question ends with "?" and has at most two (one research question,
  perhaps in two parts; not a numbered list of questions, not a sentence cut off by the token limit).
* ``LEAK_NGRAM = 6`` — a rubric leaks into the question when 6 consecutive content words of its
  description appear, in order, in the question (a question may share its topic words with the
  rubrics, but not restate a criterion).
* Coverage (ours, when an embedding model is given): the question asks only what its rubrics check. It is
  split into clauses (at ``;``, at a conjunction or comma before a question word, and before "while",
  "whereas", "considering"); each clause must be covered by one rubric (its description and evidence):
  cosine similarity of MiniLM embeddings at least ``COVERAGE_COSINE = 0.6``, or at least
  ``COVERAGE_WORDS = 0.5`` of the clause's content words (less generic ones such as "main", "potential") found
  in the rubric. Each clause is embedded alone: embedded with the first clause (to resolve "they"), "how do
  they contribute to the ecosystem" borrowed the first clause's topic and passed over rubrics that never
  mention an ecosystem. Calibrated on questions the 1.5B wrote: "What are the potential risks and failures of
  clergy ..." over rubrics that define a priest, a state religion and religious law reaches 0.54 and 40 %;
  the clauses of the moth question that its rubrics answer reach 0.68–0.78. A clause that only refers back
  ("what threatens them") can fail although a rubric answers it: the check prefers dropping a row to keeping
  one whose question asks what nothing checks. The stepwise merge asks once for a new question when a clause
  fails, and if one still fails leaves out the uncovered clauses after the first (:func:`narrowed_question`);
  the question then asks less, never something no rubric checks.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

import numpy as np

from rubricforge.config import Config
from rubricforge.pipelines.tree.serialize import leaf_nodes
from rubricforge.rubric_gen.baselines import retrieved_items
from rubricforge.schema import Candidate, Criterion, EvidenceStatement, EvidenceTree
from rubricforge.text import clip, sentence_spans

EVIDENCE_MATCH = 0.75
DUPLICATE_OVERLAP = 0.85
LEAK_NGRAM = 6
MAX_QUESTION_MARKS = 2
WORD_FUZZ = 0.85
COVERAGE_COSINE = 0.6
COVERAGE_WORDS = 0.5
Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> unit-length vectors (CorpusIndex.embed_queries)

Pool = dict[str, list[EvidenceStatement]]  # source id (leaf or retrieved snippet) -> its statements

STOPWORDS = frozenset(
    "a an the and or but of in on at to for from by with as is are was were be been being it its this that "
    "these those which who whom what how why when where than then there their they them he she his her "
    "has have had do does did not no can could should would will may might must also into over about "
    "such between both each any all more most other some".split()
)


# ---------------------------------------------------------------- text helpers


def content_words(text: str) -> list[str]:
    words = []
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in STOPWORDS or (len(word) == 1 and word.isalpha()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.append(word)
    return words


def _same_stem(a: str, b: str) -> bool:
    prefix = len(os.path.commonprefix([a, b]))
    return prefix >= 5 and prefix >= 0.8 * min(len(a), len(b))


@lru_cache(maxsize=1 << 16)
def _characters(word: str) -> int:
    """The set of the word's characters, as bits."""
    bits = 0
    for c in word:
        bits |= 1 << (ord(c) - 48)  # content words hold [a-z0-9] only
    return bits


@lru_cache(maxsize=1 << 16)
def _similar(word: str, other: str) -> bool:
    """Same stem, or a close spelling: difflib's ratio at least WORD_FUZZ (what get_close_matches tests), once
    per pair of words (the rule checks compare the same words many times: every rubric pair, every statement).
    Two cheap upper bounds of the ratio go first, as most pairs are far apart: the lengths (difflib's
    real_quick_ratio), and the characters each word has that the other lacks, none of which can match."""
    if word[:5] == other[:5] and _same_stem(word, other):
        return True
    a, b = len(word), len(other)
    if 2 * min(a, b) < WORD_FUZZ * (a + b):
        return False
    bits_a, bits_b = _characters(word), _characters(other)
    if 2 * min(a - (bits_a & ~bits_b).bit_count(), b - (bits_b & ~bits_a).bit_count()) < WORD_FUZZ * (a + b):
        return False
    m = SequenceMatcher(None, other, word)
    return m.quick_ratio() >= WORD_FUZZ and m.ratio() >= WORD_FUZZ


def _word_found(word: str, vocabulary: set[str]) -> bool:
    if word in vocabulary:
        return True
    if len(word) < 5:
        return False
    return any(_similar(word, v) for v in vocabulary)


def _found(words: list[str], other: list[str]) -> int:
    vocabulary = set(other)
    return sum(_word_found(w, vocabulary) for w in words)


def support(evidence: str, statement: str) -> float:
    """Share of the evidence's content words found in the statement (0 when it has none)."""
    words = content_words(evidence)
    return _found(words, content_words(statement)) / len(words) if words else 0.0


def best_statement(evidence: str, statements: list[EvidenceStatement]) -> tuple[EvidenceStatement | None, float]:
    best, score = None, 0.0
    for statement in statements:
        s = support(evidence, statement.text)
        if s > score:
            best, score = statement, s
    return best, score




def split_sentences(text: str, passage_id: str) -> list[EvidenceStatement]:
    """A passage as statements, one per sentence, each an exact span (the evidence pool of the search baseline)."""
    return [EvidenceStatement(text=text[a:b], passage_id=passage_id, start=a, end=b) for a, b in sentence_spans(text)]


# ---------------------------------------------------------------- evidence pools


def retrieved_sources(trace: Any) -> Pool:
    """Read :func:`~rubricforge.rubric_gen.baselines.retrieved_trace` back into an evidence pool
    (snippet id -> sentences)."""
    return {str(i["id"]): split_sentences(str(i.get("text", "")), str(i.get("passage_id", "")))
            for i in retrieved_items(trace)}


def evidence_pool(candidate: Candidate, tree: EvidenceTree) -> tuple[Pool | None, list[str]]:
    """The statements the candidate's rubrics may cite (its selected sources) and selection failures."""
    if candidate.rubric_source == "closed-book":
        return None, []
    failures: list[str] = []
    if candidate.rubric_source == "search":
        sources = retrieved_sources(candidate.selection_trace)
        for sid in candidate.selected_leaf_ids:
            if sid not in sources:
                failures.append(f"selected passage '{sid}' was not retrieved for this question")
    else:
        sources = {leaf.id: list(leaf.statements) for leaf in leaf_nodes(tree)}
        for sid in candidate.selected_leaf_ids:
            if sid not in sources:
                where = "an internal node, not a leaf" if sid in tree.nodes else "not a node"
                failures.append(f"selected leaf '{sid}' is {where} of tree {tree.id}")
    if not candidate.selected_leaf_ids:
        failures.append("no leaf selected")
    return {sid: sources[sid] for sid in candidate.selected_leaf_ids if sid in sources}, failures


# ---------------------------------------------------------------- checks


def check_rules(candidate: Candidate, tree: EvidenceTree, cfg: Config, max_rubrics: int | None = None,
                embed: Embed | None = None) -> list[str]:
    """All rule checks for a candidate (with ``embed``: the question's coverage too); sets each factual
    criterion's ``passage_ids`` and ``candidate.rule_failures``, and returns the failures (empty = pass)."""
    if candidate.generation_error is not None:
        failures = [f"generator output unusable: {candidate.generation_error}"]
    else:
        pool, failures = evidence_pool(candidate, tree)
        failures += check_criteria(candidate.question, candidate.rubrics, pool,
                                   min_rubrics=cfg.build.min_rubrics, max_rubrics=max_rubrics)
        if embed is not None:
            failures += coverage_failures(candidate.question, candidate.rubrics, embed)
    candidate.rule_failures = failures
    return failures


def check_criteria(question: str, rubrics: list[Criterion], pool: Pool | None, *, min_rubrics: int,
                   max_rubrics: int | None = None) -> list[str]:
    """Source-independent checks; ``pool`` None skips the source and evidence checks (closed-book)."""
    failures: list[str] = []
    if not question.strip():
        failures.append("question is empty")
    elif not question.rstrip().endswith("?") or question.count("?") > MAX_QUESTION_MARKS:
        failures.append(f"question is not one question ending with '?' (cut off, a statement or a list of "
                        f"questions): '{clip(question, 80)}'")
    if len(rubrics) < min_rubrics:
        failures.append(f"only {len(rubrics)} rubrics; at least {min_rubrics} required")
    if max_rubrics is not None and len(rubrics) > max_rubrics:
        failures.append(f"{len(rubrics)} rubrics; at most {max_rubrics} allowed")
    failures += _weight_failures(rubrics)
    for rubric in rubrics:
        if not rubric.description.strip():
            failures.append(f"{rubric.id}: empty description")
        if pool is not None:
            failures += _grounding_failures(rubric, pool)
    return failures + overlap_failures(question, rubrics)


def overlap_failures(question: str, rubrics: list[Criterion]) -> list[str]:
    """The duplicate and question-leak checks (a stepwise merge step is re-asked when they fail)."""
    return _duplicate_failures(rubrics) + _leak_failures(question, rubrics)


def _weight_failures(rubrics: list[Criterion]) -> list[str]:
    failures = [f"{r.id}: weight {r.weight} is not a finite number in [-1, 1]"
                for r in rubrics if not (math.isfinite(r.weight) and -1.0 <= r.weight <= 1.0)]
    if rubrics and not any(math.isfinite(r.weight) and r.weight > 0 for r in rubrics):
        failures.append("no rubric has a positive weight")
    return failures


def _grounding_failures(rubric: Criterion, pool: Pool) -> list[str]:
    """Sources within the selection; factual evidence traced to statements (sets ``passage_ids``)."""
    failures = [f"{rubric.id}: source leaf '{sid}' is not among the selected leaves"
                for sid in rubric.source_leaf_ids if sid not in pool]
    if rubric.type != "factual":
        return failures
    statements = [s for sid in rubric.source_leaf_ids for s in pool.get(sid, [])]
    if not rubric.source_leaf_ids:
        failures.append(f"{rubric.id}: factual rubric names no source leaf")
    if not [e for e in rubric.evidence if e.strip()]:
        failures.append(f"{rubric.id}: factual rubric has no evidence")
    passage_ids: list[str] = []
    for evidence in (e for e in rubric.evidence if e.strip()):
        match, score = best_statement(evidence, statements)
        if match is None or score < EVIDENCE_MATCH:
            failures.append(f"{rubric.id}: evidence '{clip(evidence, 60)}' matches no statement of its source leaves "
                            f"(best word overlap {score:.2f} < {EVIDENCE_MATCH})")
        elif match.passage_id and match.passage_id not in passage_ids:
            passage_ids.append(match.passage_id)
    rubric.passage_ids = passage_ids
    return failures


def _duplicate_failures(rubrics: list[Criterion]) -> list[str]:
    failures = []
    words = [sorted(set(content_words(r.description))) for r in rubrics]
    normal = [" ".join(r.description.lower().split()) for r in rubrics]
    for i in range(len(rubrics)):
        for j in range(i + 1, len(rubrics)):
            total = len(words[i]) + len(words[j])
            overlap = (_found(words[i], words[j]) + _found(words[j], words[i])) / total if total else 0.0
            if (normal[i] and normal[i] == normal[j]) or overlap >= DUPLICATE_OVERLAP:
                failures.append(f"{rubrics[i].id} and {rubrics[j].id} are duplicates (word overlap {overlap:.2f})")
    return failures


def _leak_failures(question: str, rubrics: list[Criterion]) -> list[str]:
    q = content_words(question)
    q_grams = {tuple(q[i:i + LEAK_NGRAM]) for i in range(len(q) - LEAK_NGRAM + 1)}
    failures = []
    for rubric in rubrics:
        d = content_words(rubric.description)
        leaked = next((g for g in (tuple(d[i:i + LEAK_NGRAM]) for i in range(len(d) - LEAK_NGRAM + 1)) if g in q_grams), None)
        if leaked:
            failures.append(f"{rubric.id}: description leaks into the question ('{' '.join(leaked)}')")
    return failures


# ---------------------------------------------------------------- coverage of the question by the rubrics

_ASKS = r"(?:how|what|why|which|whether|who|whom|when|where|to what|in what|do|does|did|is|are|can|could)\b"
_CLAUSE_BREAK = re.compile(r"\s*;\s*|,?\s+(?:and|but|or|while|whereas)\s+(?=" + _ASKS + r")|,\s*(?=" + _ASKS + r")"
                           r"|,?\s+(?:while considering|while|whereas|considering|taking into account)\s+", re.I)
GENERIC = frozenset("main key potential different various overall general specific major primary role way aspect "
                    "factor kind type other".split())


def _pieces(question: str) -> list[tuple[str, str]]:
    """The question's clauses, each with the separator before it (empty for the first), question mark dropped."""
    text = question.strip().rstrip("?")
    pieces, start, sep = [], 0, ""
    for match in _CLAUSE_BREAK.finditer(text):
        pieces.append((sep, text[start:match.start()]))
        sep, start = match.group(0), match.end()
    pieces.append((sep, text[start:]))
    return [(sep, piece) for sep, piece in pieces if piece.strip(" ,?")]


def question_clauses(question: str) -> list[str]:
    """The question's clauses (see the module docstring), without the question mark."""
    return [piece.strip(" ,?") for _, piece in _pieces(question)]


def clause_failures(question: str, rubrics: list[Criterion], embed: Embed) -> list[str | None]:
    """For each clause of the question, why no rubric covers it, or None when one does."""
    clauses = question_clauses(question)
    if not clauses or not rubrics:
        return [None] * len(clauses)
    texts = [" ".join([r.description, *r.evidence]) for r in rubrics]
    vectors = embed([*clauses, *texts])
    similarity = vectors[: len(clauses)] @ vectors[len(clauses):].T
    out: list[str | None] = []
    for clause, row in zip(clauses, similarity, strict=True):
        words = [w for w in content_words(clause) if w not in GENERIC]
        share = max((_found(words, content_words(t)) / len(words) for t in texts), default=0.0) if words else 1.0
        best = int(np.argmax(row))
        covered = row[best] >= COVERAGE_COSINE or share >= COVERAGE_WORDS
        out.append(None if covered else f"question clause '{clip(clause, 80)}' is checked by no rubric (closest "
                   f"{rubrics[best].id}: similarity {row[best]:.2f} < {COVERAGE_COSINE}, words {share:.0%} < "
                   f"{COVERAGE_WORDS:.0%})")
    return out


def coverage_failures(question: str, rubrics: list[Criterion], embed: Embed) -> list[str]:
    """One failure per clause of the question that no rubric covers (``COVERAGE_COSINE`` / ``COVERAGE_WORDS``)."""
    return [f for f in clause_failures(question, rubrics, embed) if f is not None]


def narrowed_question(question: str, failures: list[str | None]) -> str | None:
    """The question without the clauses that ``failures`` (:func:`clause_failures`) says no rubric covers, when its
    first clause (which names the subject) is covered; None when there is nothing to leave out or the first clause
    itself is uncovered."""
    if not failures or failures[0] is not None or all(f is None for f in failures):
        return None
    pieces = _pieces(question)
    kept = pieces[0][1].strip(" ,") + "".join(sep + piece.rstrip(" ,")
                                               for (sep, piece), f in zip(pieces[1:], failures[1:], strict=True)
                                               if f is None)
    return kept.strip() + "?"
