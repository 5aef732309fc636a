"""A small hand-built run directory (what `rubricforge build` writes), for the export and viewer tests.

Five trees, one tree-sourced candidate each:

======  =====  ======  ==========================================================================
tree    nodes  leaves  candidate
======  =====  ======  ==========================================================================
0000    7      5       KEEP; leaves n2 n4 n5 (3 + 2 + 2 passages); 6 rubrics, 4 factual
0001    4      3       REVISE (tag question_rubric_mismatch); leaves n1 n2 n3 (2 passages each);
                       revised question and 5 revised rubrics, 3 factual
0002    3      2       DROP (tag evidence_insufficient)
0003    1      1       failed the rule checks, never verified
0004    2      1       REVISE (tag negative_weight_rubric) whose revision failed the rule checks
======  =====  ======  ==========================================================================

So: generated 5, verified 4, retained 2 (40%), rule failures 1 (20%), revision 50%, drop 25%,
keep 25%; nodes per tree 3.4, leaves per tree 2.4; per retained example 3 selected leaves, 13/6
passages per selected leaf, 5.5 criteria, 7/11 factual. Tree 0000 holds hostile text (a passage
with a script element, a node query with an ``onerror`` attribute) for the escaping tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rubricforge.config import Config
from rubricforge.io.files import atomic_write_json, atomic_write_text
from rubricforge.io.stagelog import StageLog
from rubricforge.schema import (Candidate, Criterion, EvidenceNode, EvidenceStatement, EvidenceTree, Passage,
                                Verification)

XSS_PASSAGE = "<script>document.title='pwned'</script>Bees dance to share the direction of flowers & food."
XSS_QUERY = "<img src=x onerror=\"document.title='pwned'\"> waggle dance"
MODELS = {"generator": "gen-model-0.5b", "verifier": "audit-model-7b"}


def _usage(calls: int, prompt: int, completion: int, cost: float, hits: int = 0, failures: int = 0) -> dict:
    return {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": cost,
            "cache_hits": hits, "failures": failures}


LEDGER = {
    "by_stage": {"extract": _usage(20, 10000, 2000, 0.01, 4, 1), "decompose": _usage(6, 3000, 600, 0.003),
                 "merge": _usage(5, 5000, 2500, 0.005), "verify": _usage(4, 4000, 1900, 0.002)},
    "by_role": {"generator": _usage(31, 18000, 5100, 0.018, 4, 1), "verifier": _usage(4, 4000, 1900, 0.002)},
    "total": _usage(35, 22000, 7000, 0.02, 4, 1),
}

PASSAGES: dict[str, Passage] = {}


def _passage(pid: str, text: str, title: str) -> str:
    PASSAGES[pid] = Passage(id=pid, text=text, title=title, doc_id=f"doc-{title.lower().replace(' ', '-')}",
                            metadata={"url": f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}"})
    return pid


def _node(tree: str, nid: str, query: str, parent: str | None, depth: int, children: list[str], n_passages: int,
          texts: list[str] | None = None) -> EvidenceNode:
    pids = [_passage(f"{tree}-{nid}-p{i}", (texts or [])[i] if texts and i < len(texts) else
                     f"Passage {i} about {query}.", f"{query.split('<')[0].strip() or 'Bees'} {i}")
            for i in range(n_passages)]
    statements = [EvidenceStatement(text=f"Statement from {pid} on {query}.", passage_id=pid) for pid in pids]
    return EvidenceNode(id=nid, query=query, parent_id=parent, depth=depth, children=children, passage_ids=pids,
                        statements=statements, atomic=not children and depth > 0, facet="definition" if depth == 1 else "")


def _tree(i: int, spec: list[tuple]) -> EvidenceTree:
    tid = f"tree-{i:04d}"
    nodes = [_node(tid, *s) for s in spec]
    return EvidenceTree(id=tid, seed_passage_id=nodes[0].passage_ids[0] if nodes[0].passage_ids else "seed",
                        seed_title=f"Topic {i}", topic=["Biology", "History", "Physics", "Arts", "Biology"][i],
                        root_id="n0", nodes={n.id: n for n in nodes}, corpus_hash="c0ffee")


def trees() -> list[EvidenceTree]:
    t0 = _tree(0, [("n0", "honey bees", None, 0, ["n1", "n2", "n3"], 1),
                   ("n1", "pollination by honey bees", "n0", 1, ["n4", "n5", "n6"], 1),
                   ("n2", "colony losses", "n0", 1, [], 3),
                   ("n3", "honey production", "n0", 1, [], 1),
                   ("n4", "crops that need bees", "n1", 2, [], 2),
                   ("n5", XSS_QUERY, "n1", 2, [], 2, [XSS_PASSAGE]),
                   ("n6", "wild pollinators", "n1", 2, [], 1)])
    t0.dropped.append({"query": "history of beekeeping", "parent_id": "n1", "depth": 2, "reason": "redundant",
                       "detail": "cosine 0.93 with n0"})
    t1 = _tree(1, [("n0", "Roman roads", None, 0, ["n1", "n2", "n3"], 1), ("n1", "construction", "n0", 1, [], 2),
                   ("n2", "trade", "n0", 1, [], 2), ("n3", "military use", "n0", 1, [], 2)])
    t2 = _tree(2, [("n0", "black holes", None, 0, ["n1", "n2"], 1), ("n1", "event horizon", "n0", 1, [], 1),
                   ("n2", "Hawking radiation", "n0", 1, [], 2)])
    t3 = _tree(3, [("n0", "baroque music", None, 0, [], 2)])
    t4 = _tree(4, [("n0", "ant colonies", None, 0, ["n1"], 1), ("n1", "ant foraging", "n0", 1, [], 1)])
    return [t0, t1, t2, t3, t4]


def _rubrics(tree: EvidenceTree, leaves: list[str], n_factual: int, n_logical: int, prefix: str = "") -> list[Criterion]:
    out = []
    for i in range(n_factual):
        leaf = tree.nodes[leaves[i % len(leaves)]]
        out.append(Criterion(id=f"R{i + 1}", type="factual", weight=round(0.9 - 0.1 * i, 2), source_leaf_ids=[leaf.id],
                             description=f"{prefix}States the fact of {leaf.id} about {leaf.query}.",
                             evidence=[leaf.statements[0].text], passage_ids=[leaf.statements[0].passage_id]))
    for j in range(n_logical):
        out.append(Criterion(id=f"R{n_factual + j + 1}", type="logical", weight=0.5, source_leaf_ids=leaves[:2],
                             description=f"{prefix}Compares the facets and draws a reasoned conclusion ({j})."))
    return out


def candidates_and_verdicts(ts: list[EvidenceTree]) -> tuple[list[Candidate], list[Verification]]:
    def cand(t: EvidenceTree, leaves: list[str], nf: int, nl: int, **kw) -> Candidate:
        return Candidate(id=f"{t.id}--tree", tree_id=t.id, question=f"How do the facets of {t.nodes['n0'].query} interact?",
                         selected_leaf_ids=leaves, rubrics=_rubrics(t, leaves, nf, nl),
                         merge_trace=[{"inputs": leaves, "output": "merged", "why": "shared theme"}], **kw)

    t0, t1, t2, t3, t4 = ts
    cands = [cand(t0, ["n2", "n4", "n5"], 4, 2), cand(t1, ["n1", "n2", "n3"], 3, 2), cand(t2, ["n1", "n2"], 3, 2),
             cand(t3, ["n0"], 1, 0, rule_failures=["only 1 rubric(s); at least 5 are required"]),
             cand(t4, ["n1"], 3, 2)]
    verdicts = [
        Verification(candidate_id=cands[0].id, decision="KEEP", justification="usable as is"),
        Verification(candidate_id=cands[1].id, decision="REVISE", error_tags=["question_rubric_mismatch", "weak evidence"],
                     major_issues=["rubrics drift from the question"], justification="needs alignment",
                     fix_plan={"steps": ["narrow the question"]}, revised_question="What role did Roman roads play in trade?",
                     revised_rubrics=_rubrics(t1, ["n1", "n2", "n3"], 3, 2, prefix="Revised: ")),
        Verification(candidate_id=cands[2].id, decision="DROP", error_tags=["evidence_insufficient"],
                     justification="the leaves do not support a research question"),
        Verification(candidate_id=cands[4].id, decision="REVISE", error_tags=["negative_weight_rubric"],
                     revised_rubrics=_rubrics(t4, ["n1"], 1, 0), rule_failures=["only 1 rubric(s); at least 5 are required"]),
    ]
    return cands, verdicts


def make_run(root: Path, only: list[int] | None = None, name: str = "demo") -> Path:
    """Write the run directory ``root/name`` (only the trees whose index is in ``only``, if given)."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    ts = trees()
    cands, verdicts = candidates_and_verdicts(ts)
    keep = set(only if only is not None else range(len(ts)))
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(
        Config.model_validate({"run_dir": str(run_dir), "build": {"max_depth": 3}}).public_dict(), sort_keys=False))
    atomic_write_json(run_dir / "manifest.json", {
        "status": "complete", "corpus": {"hash": "c0ffee", "source": "default"}, "models": MODELS,
        "prompt_hashes": {"merge": "aaaa11112222", "verify": "bbbb33334444", "extract": "cccc55556666"},
        "ledger": LEDGER})
    atomic_write_json(run_dir / "seeds.json", {"seeds": [{"index": i} for i in sorted(keep)]})
    tlog, clog, vlog = (StageLog(run_dir / f"{n}.jsonl") for n in ("trees", "candidates", "verdicts"))
    for i, t in enumerate(ts):
        if i in keep:
            tlog.append(t.id, {"tree": t.model_dump(mode="json")})
    for c in cands:
        if int(c.tree_id[-4:]) in keep:
            clog.append(c.id, {"candidate": c.model_dump(mode="json")})
    for v in verdicts:
        if int(v.candidate_id.split("--")[0][-4:]) in keep:
            vlog.append(v.candidate_id, {"verification": v.model_dump(mode="json")})
    with (run_dir / "verdicts.jsonl").open("a") as fh:  # a torn last line, as after a SIGKILL
        fh.write(json.dumps({"key": "tree-9999--tree", "verification": {"candidate_id": "x"}})[:30])
    return run_dir


def lookup(pid: str) -> Passage | None:
    if not PASSAGES:
        trees()
    return PASSAGES.get(pid)
