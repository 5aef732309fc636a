"""The static viewer of a KG run (``<run>/viewer/index.html``): every sampled subgraph drawn as SVG (starts,
hidden intermediates, the answer; relation labels), its hops' evidence and passages, the question at each
step (generated, obfuscated, final), the filters' results or the drop reason, the difficulty and the
long-form query with its RACE rubrics. Same page mechanics and safety as :mod:`rubricforge.export.viewer`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubricforge.export.kg import read_examples
from rubricforge.export.run import read_config
from rubricforge.export.viewer import VIEWER_FILE, PassageLookup, open_passage_texts, render_html
from rubricforge.errors import UserError
from rubricforge.io.files import atomic_write_text, read_json
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import job_kind

TEMPLATE = Path(__file__).with_name("viewer_kg_template.html")


def is_kg_run(run_dir: Path) -> bool:
    try:
        return job_kind(read_json(run_dir / "manifest.json")) == "kg"
    except UserError:
        return False


def _log(run_dir: Path, name: str) -> dict[str, dict[str, Any]]:
    path = run_dir / f"{name}.jsonl"
    return {r["key"]: r for r in StageLog(path).records()} if path.exists() else {}


def kg_viewer_data(run_dir: Path, lookup: PassageLookup | None, notes: list[str]) -> dict[str, Any]:
    manifest = read_json(run_dir / "manifest.json")
    paths = read_json(run_dir / "kg_paths.json").get("paths", [])
    examples = {e.id: e.model_dump(mode="json") for e in read_examples(run_dir)}
    questions, filters, longform = (_log(run_dir, n) for n in ("kg_questions", "kg_filters", "kg_longform"))
    items = []
    for p in paths:
        q, f = questions.get(p["id"]), filters.get(p["id"])
        items.append({"path": p, "question": q, "filters": f, "longform": longform.get(p["id"]),
                      "example": examples.get(p["id"]), "drop": (q or {}).get("drop") or (f or {}).get("drop")})
    passages = {}
    for pid in dict.fromkeys(e["passage_id"] for p in paths for e in p["edges"]):
        if lookup is not None and (found := lookup(pid)) is not None:
            passages[pid] = {"title": found.title, "text": found.text}
    counts = {k: v for k, v in (manifest.get("counts") or {}).items() if not isinstance(v, dict)}
    return {"run": {"name": run_dir.resolve().name, "counts": counts}, "notes": notes, "items": items,
            "passages": passages}


def write_kg_viewer(run_dir: str | Path, passage_lookup: PassageLookup | None = None) -> Path:
    run_dir = Path(run_dir)
    notes: list[str] = []
    index = None
    if passage_lookup is None:
        manifest = read_json(run_dir / "manifest.json")
        index, why = open_passage_texts(read_config(run_dir), (manifest.get("corpus") or {}).get("hash", ""))
        passage_lookup = index.get if index is not None else None
        if why:
            notes.append(why)
    try:
        data = kg_viewer_data(run_dir, passage_lookup, notes)
    finally:
        if index is not None:
            index.close()
    path = run_dir / VIEWER_FILE
    atomic_write_text(path, render_html(data, title=f"rubricforge KG · {run_dir.resolve().name}", template=TEMPLATE))
    return path
