"""Read a finished (or stopped) run directory back into schema objects, for the export and the viewer.

What counts (the same rules for the dataset, the card and the viewer):

* **trees** — every tree in ``trees.jsonl``;
* **candidates** — every candidate in ``candidates.jsonl``; the *generated examples* are those of
  the run's ``build.rubric_source`` (an ablation run also logs the tree candidate whose question the
  baseline reused; the viewer shows it, the statistics do not count it);
* **verdicts** — ``verdicts.jsonl`` by candidate id (a candidate that failed the rule checks has none);
* **examples** — the retained rows: ``examples.jsonl`` when the pipeline wrote one, otherwise derived
  from the logs with :func:`~rubricforge.pipelines.tree.verification.final_example` under the config's
  ``build.keep_decisions``.

A record that no longer validates against the schema is skipped and listed in ``RunData.rejects``.
Every list is sorted by id, so exports of the same logs are identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.io.files import read_json
from rubricforge.io.stagelog import StageLog
from rubricforge.schema import Candidate, EvidenceTree, Example, KGExample, Verification

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E", Example, KGExample)

GATES_FILE = "quality.json"  # the quality gates' outcome (:mod:`rubricforge.jobs.gates`), what the export drops


@dataclass
class RunData:
    run_dir: Path
    cfg: Config
    manifest: dict[str, Any]
    trees: dict[str, EvidenceTree]
    candidates: list[Candidate]  # all sources, sorted by id
    verdicts: dict[str, Verification]  # candidate id -> verdict
    examples: list[Example]  # retained rows, sorted by id
    rejects: list[str] = field(default_factory=list)  # "<file> <key>: <why>" for unreadable records

    @property
    def name(self) -> str:
        return self.run_dir.resolve().name

    @property
    def source(self) -> str:
        return self.cfg.build.rubric_source

    def generated(self) -> list[Candidate]:
        """The run's generated examples: candidates of the configured rubric source."""
        return [c for c in self.candidates if c.rubric_source == self.source]

    def models(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.manifest.get("models") or {}).items()}

    def corpus_hash(self) -> str:
        corpus = self.manifest.get("corpus")
        found = self.manifest.get("corpus_hash") or (corpus.get("hash") if isinstance(corpus, dict) else None)
        return str(found or next((t.corpus_hash for t in self.trees.values() if t.corpus_hash), ""))


def read_config(run_dir: Path) -> Config:
    """The run's own resolved config (``config.yaml``), without environment overrides."""
    from rubricforge.config import load_config

    path = run_dir / "config.yaml"
    return load_config(path, environ={}) if path.is_file() else Config(run_dir=str(run_dir))


def load_run(run_dir: str | Path, cfg: Config | None = None, logs: Mapping[str, StageLog[Any]] | None = None) -> RunData:
    """Everything the run logged; ``cfg`` defaults to the run's ``config.yaml``; ``logs`` (trees, candidates,
    verdicts), when the caller holds them, are not read again."""
    run_dir = Path(run_dir)
    markers = ("config.yaml", "manifest.json", "trees.jsonl")
    if not run_dir.is_dir() or not any((run_dir / m).exists() for m in markers):
        raise UserError(f"{run_dir} is not a run directory (none of {', '.join(markers)} found)",
                        "pass the folder `rubricforge build` wrote (runs/<name>), or run the build first")
    cfg = cfg or read_config(run_dir)
    rejects: list[str] = []
    logs = logs or {}

    def read(name: str, field_name: str, model: type[M]) -> list[M]:
        return _read(logs[name] if name in logs else run_dir / f"{name}.jsonl", field_name, model, rejects)

    trees = {t.id: t for t in read("trees", "tree", EvidenceTree)}
    candidates = sorted(read("candidates", "candidate", Candidate), key=lambda c: c.id)
    verdicts = {v.candidate_id: v for v in read("verdicts", "verification", Verification)}
    manifest = read_json(run_dir / "manifest.json", "restore it or re-run the build to rewrite it")
    run = RunData(run_dir, cfg, manifest, dict(sorted(trees.items())), candidates, verdicts, [], rejects)
    if (run_dir / "examples.jsonl").exists():
        run.examples = _read(run_dir / "examples.jsonl", "example", Example, rejects)
    else:
        run.examples = derive_examples(run)
    run.examples.sort(key=lambda e: e.id)
    return run


def derive_examples(run: RunData) -> list[Example]:
    """The retained rows, from candidates + verdicts + trees (what the build keeps)."""
    from rubricforge.pipelines.prompting import prompt_hashes
    from rubricforge.pipelines.tree.verification import final_example, prompt_names

    hashes = run.manifest.get("prompt_hashes") or prompt_hashes()
    out = []
    for cand in run.generated():
        verdict, tree = run.verdicts.get(cand.id), run.trees.get(cand.tree_id)
        if verdict is None or tree is None:
            continue
        bits = {"models": run.models(), "corpus_hash": run.corpus_hash(),
                "prompt_hashes": {n: hashes[n] for n in prompt_names(cand) if n in hashes}}
        if (example := final_example(cand, verdict, tree, run.cfg, bits)) is not None:
            out.append(example)
    return out


def _read(source: Path | StageLog[Any], field_name: str, model: type[M], rejects: list[str]) -> list[M]:
    """The typed records of a stage log (a path is read; a missing file has none)."""
    if isinstance(source, Path) and not source.exists():
        return []
    log = source if isinstance(source, StageLog) else StageLog(source)
    path = log.path
    out = []
    for record in log.records():
        try:
            out.append(model.model_validate(record[field_name]))
        except (KeyError, ValidationError) as exc:
            why = f"no '{field_name}' field" if isinstance(exc, KeyError) else f"{exc.error_count()} schema error(s)"
            rejects.append(f"{path.name} {record.get('key')}: {why}")
    return out


def read_gates(run_dir: Path, examples: list[E]) -> tuple[list[E], dict[str, Any]]:
    """The examples the quality gates kept, and their record for ``stats.json`` (``quality.json`` and the count
    exported). No record: no gates ran, nothing is dropped (the card says so). A record that did not gate every
    example (the run went on after it) is a UserError."""
    path = run_dir / GATES_FILE
    record = read_json(path, "delete it and run the build again (it resumes, gates and exports)")
    gated = set(record.pop("gated", []))
    if record and (missing := [e.id for e in examples if e.id not in gated]):
        raise UserError(f"{path} gated {len(gated)} examples but not {len(missing)} of this run's (e.g. {missing[0]})",
                        "run the build again: it resumes, gates every example and exports")
    dropped = {d["id"] for d in record.get("dropped", [])}
    kept = [e for e in examples if e.id not in dropped]
    return kept, {**record, "exported": len(kept)}
