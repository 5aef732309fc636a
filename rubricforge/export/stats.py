"""Statistics of a run, as in DeepRubric Tables 6 and 7, plus LLM calls, tokens and cost.

Definitions (also printed on the dataset card):

* *generated* — candidates of the run's rubric source (one per tree); *retained* — dataset rows
  (KEEP + REVISE by default, ``build.keep_decisions``); retained % is over generated.
* *rule-failure rate* — generated candidates that failed the deterministic rule checks (they are
  never sent to the verifier), over generated.
* *revision / drop / keep / unparseable rates* — verifier decisions over verified candidates (in the
  paper every generated example was verified, so its rates share one denominator).
* *partial* — the run's status when it did not end ``complete`` (it failed or stopped): the rows are
  what it finished, and a re-run of the same command finishes it and exports again;
* *cut trees* — trees holding structured calls whose answer stayed invalid after the re-prompts (each
  cut a node's statements, a child or a subtree; ``EvidenceTree.invalid_answers``);
* tree statistics are means over all trees; example statistics (selected leaves, passages per
  selected leaf, criteria, factual/logical split) are over the retained rows, and again over all
  generated candidates so a run with few retained rows still shows what was produced.
* *passages per selected leaf* — the corpus passages a selected tree leaf was grounded in.
* *exact-span evidence* — factual criteria whose every evidence string is, verbatim, a statement of one
  of their source leaves that is an exact passage span (a sentence the extractor selected, with its
  offsets), over factual criteria.

Deterministic repairs (:mod:`rubricforge.pipelines.tree.repairs`): the rubrics rewritten and removed, and the
questions narrowed, before the rule checks (``Candidate.repairs``) and in verifier revisions
(``Verification.repairs``) of the generated candidates, counted by the Table 7 category each repair belongs to.

Table 7 reasons: each REVISE verdict gets one *primary* reason — its first error tag (then its
first major issue) that matches one of :data:`REVISION_RULES`, tried in the order listed, on the
lower-cased text with ``_``/``-`` read as spaces; nothing matching is "Other". Weight and scoring
issues all count as the paper's "negative-weight" category (its §C.4 calls it "invalid weights").
"""

from __future__ import annotations

import re
from collections import Counter
from statistics import mean
from typing import Any

from rubricforge.export.run import RunData
from rubricforge.pipelines.tree.repairs import count_repairs
from rubricforge.schema import Criterion, EvidenceTree, Verification

DECISIONS = ("KEEP", "REVISE", "DROP", "UNPARSEABLE")

PAPER_TABLE6: dict[str, Any] = {
    "generated": 9838, "retained": 9064, "retained_rate": 0.921, "tree_depth": 3, "nodes_per_tree": 54.5,
    "leaves_per_tree": 38.7, "selected_leaves_per_example": 5.0, "passages_per_selected_leaf": 2.9,
    "criteria_per_example": 7.0, "factual_share": 0.584, "logical_share": 0.416, "revision_rate": 0.915,
    "drop_rate": 0.079, "tree_generation_model": "DeepSeek-V3.2", "quality_audit_model": "GPT-5.1",
}

OTHER = "Other"
REVISION_RULES: list[tuple[str, str]] = [
    ("Negative-weight rubric removal", r"\bnegative\b|\bweight|\bscoring\b"),
    ("Entity / domain / time mismatch", r"\bentit(?:y|ies)\b|\bdomain|\btime\b|\btemporal|\bdates?\b|\byears?\b|\bperiod\b"),
    ("Evidence sufficiency / grounding", r"\bevidence|\bground|\bsupport|\bunsupported|\bsufficien|\binsufficien"
                                         r"|\bsource leaf|\bcitation|\bhallucinat|\battribut"),
    ("Question scope / merge overreach", r"\bscope|\boverreach|\bmerge|\bbroad|\bnarrow|\bover ?general|\bstrengthen"
                                         r"|\bfaithful"),
    ("Rubric design / granularity", r"\bgranular|\batomic|\bredundan|\bduplicat|\bvague|\bdesign|\bjudgeable"
                                    r"|\bchecklist|\boverlap|\bspecific"),
    ("Question–rubric mismatch", r"\bmismatch|\balign|\bmisalign|\boff topic|\brelevan|\bcent(?:er|re)d"),
]
PAPER_TABLE7: dict[str, float] = {
    "Question–rubric mismatch": 0.564, "Evidence sufficiency / grounding": 0.182,
    "Question scope / merge overreach": 0.083, "Negative-weight rubric removal": 0.082,
    "Rubric design / granularity": 0.053, "Entity / domain / time mismatch": 0.025, OTHER: 0.010,
}
_COMPILED = [(name, re.compile(pattern)) for name, pattern in REVISION_RULES]
LEDGER_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits", "failures")


def revision_category(text: str) -> str | None:
    norm = re.sub(r"[_\-]+", " ", text.lower())
    return next((name for name, rx in _COMPILED if rx.search(norm)), None)


def primary_revision_reason(v: Verification) -> str:
    for text in [*v.error_tags, *v.major_issues]:
        if (category := revision_category(str(text))) is not None:
            return category
    return OTHER


def compute_stats(run: RunData) -> dict[str, Any]:
    """All statistics of the card, JSON-ready (``dataset/stats.json``)."""
    from rubricforge.pipelines.tree.serialize import leaf_nodes

    trees = list(run.trees.values())
    generated = run.generated()
    verdicts = [run.verdicts[c.id] for c in generated if c.id in run.verdicts]
    decisions: Counter[str] = Counter(v.decision for v in verdicts)
    n_gen, n_ver, n_ret = len(generated), len(verdicts), len(run.examples)
    rule_failed = sum(1 for c in generated if c.rule_failures or c.generation_error)
    revise_failed = sum(1 for v in verdicts if v.decision == "REVISE" and v.rule_failures)
    counts = {
        "trees": len(trees), "nodes": sum(len(t.nodes) for t in trees),
        "leaves": sum(len(leaf_nodes(t)) for t in trees), "dropped_children": sum(len(t.dropped) for t in trees),
        "cut_trees": sum(1 for t in trees if t.invalid_answers), "invalid_answers": sum(t.invalid_answers for t in trees),
        "generated": n_gen, "generation_errors": sum(1 for c in generated if c.generation_error),
        "rule_failed": rule_failed, "verified": n_ver, "not_verified": n_gen - rule_failed - n_ver,
        "decisions": {d: decisions.get(d, 0) for d in DECISIONS}, "revise_rule_failed": revise_failed,
        "retained": n_ret, "unreadable_records": len(run.rejects),
    }
    rates = {"retained": _ratio(n_ret, n_gen), "rule_failure": _ratio(rule_failed, n_gen),
             "keep": _ratio(decisions["KEEP"], n_ver), "revision": _ratio(decisions["REVISE"], n_ver),
             "drop": _ratio(decisions["DROP"], n_ver), "unparseable": _ratio(decisions["UNPARSEABLE"], n_ver)}
    models = run.models()
    return {
        "run": run.name, "rubric_source": run.source,
        "partial": None if (status := run.manifest.get("status", "complete")) == "complete" else status,
        "keep_decisions": list(run.cfg.build.keep_decisions), "corpus_hash": run.corpus_hash(),
        "corpus_source": run.cfg.corpus.source,
        "models": {"tree_generation": models.get("generator", run.cfg.llm.generator.model),
                   "quality_audit": models.get("verifier", run.cfg.llm.verifier.model)},
        "counts": counts,
        "rates": rates,
        "trees": {"depth_configured": run.cfg.build.max_depth,
                  "depth_max": max((n.depth for t in trees for n in t.nodes.values()), default=None),
                  "nodes_per_tree": _mean([len(t.nodes) for t in trees]),
                  "leaves_per_tree": _mean([len(leaf_nodes(t)) for t in trees])},
        "retained_examples": _example_stats([(e.provenance.tree_id, e.provenance.leaf_ids, e.rubrics)
                                             for e in run.examples], run.trees),
        "generated_candidates": _example_stats([(c.tree_id, c.selected_leaf_ids, c.rubrics)
                                                for c in generated if c.rubrics], run.trees),
        "revision_reasons": _revision_reasons([v for v in verdicts if v.decision == "REVISE"]),
        "repairs": count_repairs([r for c in generated for r in c.repairs] + [r for v in verdicts for r in v.repairs]),
        "cost": _cost(run.manifest.get("ledger") or {}, n_ret, len(trees)),
        "empty_reason": None if n_ret else _empty_reason(counts, run),
        "unreadable_records": run.rejects,
        "paper": {"table6": PAPER_TABLE6, "table7": PAPER_TABLE7},
    }


def _example_stats(rows: list[tuple[str, list[str], list[Criterion]]], trees: dict[str, EvidenceTree]) -> dict[str, Any]:
    passages = [len(trees[tid].nodes[leaf].passage_ids) for tid, leaves, _ in rows
                for leaf in leaves if tid in trees and leaf in trees[tid].nodes]
    rubrics = [r for _, _, rs in rows for r in rs]
    factual = sum(1 for r in rubrics if r.type == "factual")
    exact = sum(1 for tid, _, rs in rows for r in rs if r.type == "factual" and tid in trees and exact_span_evidence(r, trees[tid]))
    return {"n": len(rows), "selected_leaves_per_example": _mean([len(leaves) for _, leaves, _ in rows]),
            "passages_per_selected_leaf": _mean(passages),
            "criteria_per_example": _mean([len(rs) for _, _, rs in rows]),
            "factual_share": _ratio(factual, len(rubrics)), "logical_share": _ratio(len(rubrics) - factual, len(rubrics)),
            "exact_span_evidence_share": _ratio(exact, factual)}


def exact_span_evidence(rubric: Criterion, tree: EvidenceTree) -> bool:
    """True when the rubric has evidence and every piece is, verbatim, a statement of one of its source leaves
    that is an exact passage span (a selected sentence, with offsets)."""
    spans = {s.text for leaf in rubric.source_leaf_ids if leaf in tree.nodes
             for s in tree.nodes[leaf].statements if s.start is not None}
    return bool(rubric.evidence) and all(e in spans for e in rubric.evidence)


def _revision_reasons(revised: list[Verification]) -> dict[str, Any]:
    primary = Counter(primary_revision_reason(v) for v in revised)
    categories = [name for name, _ in REVISION_RULES] + [OTHER]
    tags = Counter(re.sub(r"[_\-\s]+", " ", str(t).strip().lower()) for v in revised for t in v.error_tags)
    return {"n_revised": len(revised), "counts": {c: primary.get(c, 0) for c in categories},
            "rates": {c: _ratio(primary.get(c, 0), len(revised)) for c in categories},
            "rules": dict(REVISION_RULES), "top_error_tags": dict(tags.most_common(20))}


def _cost(ledger: dict[str, Any], n_retained: int, n_trees: int) -> dict[str, Any]:
    def clean(entry: Any) -> dict[str, float]:
        entry = entry if isinstance(entry, dict) else {}
        return {f: round(float(entry.get(f, 0) or 0), 6) for f in LEDGER_FIELDS}

    def per(entry: dict[str, float], n: int) -> dict[str, float] | None:
        if not n:
            return None
        return {"calls": round(entry["calls"] / n, 3),
                "tokens": round((entry["prompt_tokens"] + entry["completion_tokens"]) / n, 1),
                "cost_usd": round(entry["cost_usd"] / n, 6)}

    by_stage = {k: clean(v) for k, v in sorted((ledger.get("by_stage") or {}).items())}
    total = clean(ledger.get("total"))
    return {"by_stage": by_stage, "by_role": {k: clean(v) for k, v in sorted((ledger.get("by_role") or {}).items())},
            "total": total, "per_retained_example": per(total, n_retained), "per_tree": per(total, n_trees),
            "by_stage_per_retained_example": {k: per(v, n_retained) for k, v in by_stage.items()}}


def _empty_reason(counts: dict[str, Any], run: RunData) -> str:
    if not counts["trees"]:
        return "no evidence tree was built (the run stopped before its first tree: see its manifest.json and logs)"
    if not counts["generated"]:
        return "no query–rubric candidate was generated from the trees"
    keep = run.cfg.build.keep_decisions
    why = {"DROP": "were dropped by the verifier", "UNPARSEABLE": "got an unparseable verifier answer"}
    parts = [(counts["rule_failed"], "failed the rule checks")]
    parts += [(n, why.get(d, f"were judged {d}, which build.keep_decisions leaves out"))
              for d, n in counts["decisions"].items() if d not in keep]
    parts += [(counts["revise_rule_failed"], "were revised into rubrics that failed the rule checks"),
              (counts["not_verified"], "were not verified (the run stopped early)")]
    said = "; ".join(f"{n} {what}" for n, what in parts if n)
    return f"none of the {counts['generated']} generated examples was retained: {said or 'see the viewer'}"


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _mean(values: list[int]) -> float | None:
    return round(float(mean(values)), 3) if values else None
