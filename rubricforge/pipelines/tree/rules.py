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
  What a clause and a rubric share with the tree's root query does not count (docs/methods.md D-2): a cosine pass
  also needs ``COVERAGE_BEYOND_TOPIC = 0.4`` once both vectors lose their component along the root query, and a
  word pass also needs half of the clause's words that are not the root's (seed 9's "reflect the political climate
  of the time" reached 0.64 with a rubric on Macbeth's ambition through "Macbeth" alone; 0.32 beyond it).
* ``PROMPT_VOCABULARY`` — the question may not use the prompts' words ("stakeholders", "timeline", "as discussed
  in the evidence", "the evidence provided"); a rubric description may not fill its 300-character bound (cut).
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
from rubricforge.rubric_gen.criteria import TEXT_CHARS
from rubricforge.schema import Candidate, Criterion, EvidenceStatement, EvidenceTree
from rubricforge.text import clip, sentence_spans

EVIDENCE_MATCH = 0.75
DUPLICATE_OVERLAP = 0.85
LEAK_NGRAM = 6
MAX_QUESTION_MARKS = 2
WORD_FUZZ = 0.85
COVERAGE_COSINE = 0.6
COVERAGE_WORDS = 0.5
COVERAGE_BEYOND_TOPIC = 0.4
Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> unit-length vectors (CorpusIndex.embed_queries)

Pool = dict[str, list[EvidenceStatement]]  # source id (leaf or retrieved snippet) -> its statements

# Words of the decomposition and question prompts that a small model copies into its question in place of the
# subject ("the key stakeholders involved in substitution reactions", "as discussed in the evidence"): a question is
# read by an agent that sees none of the evidence, and names the subject's own people, places and processes.
PROMPT_VOCABULARY = re.compile(
    r"\bstakeholders?\b|\btimelines?\b"
    r"|\b(?:in|from|by|to|on) the (?:evidence|statements?|passages?|leaves|leaf|snippets?|provided \w+)\b"
    r"|\b(?:the|this|these) (?:evidence|statements?|passages?|material|facts|information) (?:provided|given|above|"
    r"shown|listed|presented)\b|\b(?:provided|given|above) (?:evidence|statements?|passages?|material)\b"
    r"|\bas (?:discussed|described|mentioned|stated|shown|noted|presented|outlined) (?:above|earlier|here)\b", re.I)

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
            failures += coverage_failures(candidate.question, candidate.rubrics, embed, root_topic(tree))
    candidate.rule_failures = failures
    return failures


def root_topic(tree: EvidenceTree) -> str:
    """The tree's root query (the topic every clause and rubric of its candidate shares)."""
    root = tree.nodes.get(tree.root_id)
    return root.query if root is not None else tree.seed_title


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
    failures += vocabulary_failures(question)
    failures += _weight_failures(rubrics)
    for rubric in rubrics:
        if not rubric.description.strip():
            failures.append(f"{rubric.id}: empty description")
        elif len(rubric.description) >= TEXT_CHARS:
            failures.append(f"{rubric.id}: description cut at the {TEXT_CHARS}-character bound: "
                            f"'…{rubric.description[-40:]}'")
        if pool is not None:
            failures += _grounding_failures(rubric, pool)
    return failures + overlap_failures(question, rubrics)


def vocabulary_failures(question: str) -> list[str]:
    """The question uses a word of the pipeline's prompts, not of its subject (:data:`PROMPT_VOCABULARY`)."""
    found = list(dict.fromkeys(m.group(0).lower() for m in PROMPT_VOCABULARY.finditer(question)))
    return [f"question uses prompt vocabulary, not its subject's: {', '.join(repr(f) for f in found)}"] if found else []


def cut_at_bound(text: str, pattern: str) -> bool:
    """Whether ``text`` fits ``pattern`` (a grammar pattern of the stepwise merge) only with one of its bounded runs
    ``{m,n}`` at its longest: where the grammar made the model stop mid-phrase ("... of Ancient Gre.")."""
    bounds = list(re.finditer(r"\{(\d+),(\d+)\}", pattern))
    return any(re.fullmatch(pattern[:b.start()] + "{" + b.group(2) + "}" + pattern[b.end():], text) for b in bounds)


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


def clause_failures(question: str, rubrics: list[Criterion], embed: Embed, topic: str = "") -> list[str | None]:
    """For each clause of the question, why no rubric covers it, or None when one does. ``topic`` (the tree's root
    query) is discounted: a rubric covers a clause by what they share beyond it (see the module docstring)."""
    clauses = question_clauses(question)
    if not clauses or not rubrics:
        return [None] * len(clauses)
    texts = [" ".join([r.description, *r.evidence]) for r in rubrics]
    vectors = embed([*clauses, *texts, *([topic] if topic.strip() else [])])
    clause_vectors, text_vectors = vectors[: len(clauses)], vectors[len(clauses): len(clauses) + len(texts)]
    similarity = clause_vectors @ text_vectors.T
    residual = _beyond(clause_vectors, vectors[-1]) @ _beyond(text_vectors, vectors[-1]).T if topic.strip() else None
    topic_words = set(content_words(topic))
    out: list[str | None] = []
    for n, (clause, row) in enumerate(zip(clauses, similarity, strict=True)):
        words = [w for w in content_words(clause) if w not in GENERIC]
        own = [w for w in words if not _word_found(w, topic_words)]  # the clause's words beyond the topic's
        share = _best_share(words, texts)
        if own != words:
            share = min(share, _best_share(own, texts)) if own else share
        # a clause that is only the topic ("what is Macbeth") has nothing beyond it: the plain cosine decides
        beyond = residual[n] if residual is not None and own else np.ones_like(row)
        passes = (row >= COVERAGE_COSINE) & (beyond >= COVERAGE_BEYOND_TOPIC)
        best = int(np.argmax(np.where(passes, 2.0, 0.0) + np.minimum(row, beyond)))
        if passes[best] or share >= COVERAGE_WORDS:
            out.append(None)
            continue
        discounted = f", beyond the topic {beyond[best]:.2f}" if residual is not None and own else ""
        out.append(f"question clause '{clip(clause, 80)}' is checked by no rubric (closest {rubrics[best].id}: "
                   f"similarity {row[best]:.2f}{discounted}, needs {COVERAGE_COSINE}"
                   f"{f' and {COVERAGE_BEYOND_TOPIC}' if discounted else ''}; words {share:.0%} < {COVERAGE_WORDS:.0%})")
    return out


def _best_share(words: list[str], texts: list[str]) -> float:
    """The largest share of ``words`` found in one of ``texts`` (1 when there are no words)."""
    return max((_found(words, content_words(t)) / len(words) for t in texts), default=0.0) if words else 1.0


def _beyond(vectors: np.ndarray, topic: np.ndarray) -> np.ndarray:
    """``vectors`` without their component along ``topic``, re-normalised (a vector that was the topic: zero)."""
    rest = vectors - np.outer(vectors @ topic, topic)
    norms = np.linalg.norm(rest, axis=1, keepdims=True)
    return np.divide(rest, norms, out=np.zeros_like(rest), where=norms > 1e-6)


def coverage_failures(question: str, rubrics: list[Criterion], embed: Embed, topic: str = "") -> list[str]:
    """One failure per clause of the question that no rubric covers (:func:`clause_failures`)."""
    return [f for f in clause_failures(question, rubrics, embed, topic) if f is not None]


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
