"""A static HTML viewer of a run (``<run>/viewer/index.html``): one self-contained file, no network.

The run's trees, candidates, verdicts and the texts of the passages they cite are embedded as one
JSON document (``<script type="application/json" id="rf-data">``) and rendered in the browser by the
inline script of ``viewer_template.html``: a list of trees and candidates, and for the selected one
the question (original and revised), the verifier's decision (tags, issues, justification, fix
plan, raw output when unparseable), the rubrics with type, weight, source leaves, evidence and
resolved passages, the rule-check failures, the selection and merge traces, and the evidence tree
as collapsible nodes (query, depth, passages, statements, notes, dropped children with reasons)
with the selected leaves highlighted.

Safety: the JSON is escaped for a ``<script>`` element (``<``, ``>``, ``&`` as ``\\u003c`` ...), and the
script inserts every value as text, never as HTML; a Content-Security-Policy forbids any network
request.

Passage texts come from ``passage_lookup`` (e.g. ``CorpusIndex.get``) or, by default, from the
corpus index named in the run's config when its snapshot hash matches the run's; otherwise the
viewer shows passage ids only and says why.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.export.run import RunData, load_run
from rubricforge.export.stats import compute_stats
from rubricforge.io.files import atomic_write_text
from rubricforge.schema import Candidate, Example, Passage

TEMPLATE = Path(__file__).with_name("viewer_template.html")
VIEWER_FILE = Path("viewer") / "index.html"
MAX_TREES = 500  # one page stays a few tens of MB; browse a bigger run with max_trees or a narrower run dir
_PLACEHOLDER = re.compile(r"__RF_(TITLE|DATA)__")
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}

PassageLookup = Callable[[str], Passage | None]


def write_viewer(run_dir: str | Path | RunData, passage_lookup: PassageLookup | None = None,
                 max_trees: int | None = MAX_TREES) -> Path:
    """Write ``run_dir/viewer/index.html`` and return its path (a KG run gets the KG viewer); ``run_dir`` may
    be the run already read (:func:`~rubricforge.export.run.load_run`)."""
    from rubricforge.export.kg_viewer import is_kg_run, write_kg_viewer

    if isinstance(run_dir, RunData):
        run = run_dir
    elif is_kg_run(Path(run_dir)):
        return write_kg_viewer(run_dir, passage_lookup)
    else:
        run = load_run(run_dir)
    notes: list[str] = []
    index = None
    if passage_lookup is None:
        index, why = open_passage_texts(run.cfg, run.corpus_hash())
        passage_lookup = index.get if index is not None else None
        if why:
            notes.append(why)
    try:
        data = viewer_data(run, passage_lookup, max_trees, notes)
    finally:
        if index is not None:
            index.close()
    path = run.run_dir / VIEWER_FILE
    atomic_write_text(path, render_html(data, title=f"rubricforge · {run.name}"))
    return path


def render_html(data: dict[str, Any], title: str, template: Path = TEMPLATE) -> str:
    """The template with the title (HTML-escaped) and the data (JSON escaped for a script element)."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    payload = re.sub("[<>&\u2028\u2029]", lambda m: _SCRIPT_ESCAPES[m.group(0)], payload)
    values = {"TITLE": html.escape(title), "DATA": payload}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template.read_text(encoding="utf-8"))


def viewer_data(run: RunData, passage_lookup: PassageLookup | None, max_trees: int | None = MAX_TREES,
                notes: list[str] | None = None) -> dict[str, Any]:
    """The JSON document the page renders."""
    notes = list(notes or [])
    trees = list(run.trees.values())
    if max_trees is not None and len(trees) > max_trees:
        notes.append(f"showing the first {max_trees} of {len(trees)} trees")
        trees = trees[:max_trees]
    shown = {t.id for t in trees}
    candidates = [c for c in run.candidates if c.tree_id in shown]
    stats = compute_stats(run)
    retained = {e.id: e for e in run.examples}
    return {
        "run": {"name": run.name} | {k: stats[k] for k in ("rubric_source", "corpus_hash", "models", "counts")},
        "notes": notes,
        "trees": [t.model_dump(mode="json") for t in trees],
        "candidates": [_candidate(run, c, retained) for c in candidates],
        "passages": _passages(run, trees, candidates, passage_lookup, notes),
    }


def _candidate(run: RunData, c: Candidate, retained: dict[str, Example]) -> dict[str, Any]:
    v = run.verdicts.get(c.id)
    example = retained.get(c.id)
    label = v.decision if v else ("rule failure" if c.rule_failures or c.generation_error else "not verified")
    return {**c.model_dump(mode="json"), "verification": v.model_dump(mode="json") if v else None,
            "decision_label": label, "retained": example is not None,
            "final_question": example.question if example else None,
            "status": candidate_status(run, c, retained)}


def candidate_status(run: RunData, c: Candidate, retained: dict[str, Example]) -> str:
    """Why a candidate is, or is not, in the dataset (one phrase)."""
    v = run.verdicts.get(c.id)
    if c.rubric_source != run.source:
        return f"ablation input: its question was given to the {run.source} baseline"
    if c.generation_error:
        return f"generation failed: {c.generation_error}"
    if c.rule_failures:
        return f"failed {len(c.rule_failures)} rule check(s), not sent to the verifier"
    if v is None:
        return "not verified yet (the run stopped before the verifier reached it)"
    if c.id in retained:
        return f"retained ({v.decision})"
    if v.decision == "UNPARSEABLE":
        return "the verifier's answer could not be read"
    if v.decision == "REVISE" and v.rule_failures:
        return "the verifier's revision failed the rule checks"
    if v.decision not in run.cfg.build.keep_decisions:
        return f"{v.decision} is not in build.keep_decisions"
    return f"not retained ({v.decision})"


def _passages(run: RunData, trees: list[Any], candidates: list[Candidate], lookup: PassageLookup | None,
              notes: list[str]) -> dict[str, dict[str, str]]:
    if lookup is None:
        return {}
    ids: list[str] = []
    for t in trees:
        for n in t.nodes.values():
            ids += n.passage_ids + [s.passage_id for s in n.statements]
    for c in candidates:
        v = run.verdicts.get(c.id)
        for r in c.rubrics + ((v.revised_rubrics or []) if v else []):
            ids += r.passage_ids
    out, missing = {}, 0
    for pid in dict.fromkeys(p for p in ids if p):
        p = lookup(pid)
        if p is None:
            missing += 1
            continue
        out[pid] = {"title": p.title, "text": p.text, "doc_id": p.doc_id, "url": str(p.metadata.get("url") or "")}
    if missing:
        notes.append(f"{missing} cited passage(s) were not found in the corpus index")
    return out


def open_passage_texts(cfg: Config, corpus_hash: str) -> tuple[Any, str | None]:
    """The run's corpus index for passage texts, or None and the reason it cannot be used."""
    from rubricforge.corpora.index_store import CorpusIndex

    path = cfg.index_dir()
    try:
        index = CorpusIndex.open(path)
    except UserError:
        return None, f"passage texts not embedded: no corpus index at {path}"
    if corpus_hash and index.corpus_hash != corpus_hash:
        index.close()
        return None, f"passage texts not embedded: the index at {path} holds another corpus snapshot"
    return index, None
