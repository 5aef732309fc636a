"""Export of a KG run (``rubricforge build --source kg``): the same dataset folder, configs and files as the
evidence-tree export (:func:`~rubricforge.export.dataset.write_export`), with KG rows, KG statistics and
a KG card (:mod:`rubricforge.export.kg_card`).

**default** (``hf/``, ``data.parquet``, ``data.jsonl``): one retained example per row, :data:`KG_COLUMNS`.
**drtulu** (the Hub's ``default`` config, the one DR Tulu loads): per example an exact-answer row that DR Tulu
routes to its exact-answer verifier (``dataset`` = ``rl_rag_exact_answer``, ``ground_truth`` = a JSON list of
the answer and its aliases; :mod:`rubricforge.export.convert.drtulu`).
**drtulu_rubric**: per example with RACE rubrics a ``long_form`` row in DR Tulu's rubric layout (``dataset`` =
``general_rubric``; a criterion's weight is its dimension weight times its own weight, its title
``<dimension>: <criterion>``). A config of its own: DR Tulu's rubric buffer reads ``rubrics`` from every
training row, so rubric and exact-answer rows are trained in separate runs (or without the buffer).
**trl**: the default columns plus the App. D agent ``prompt`` with the question.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.agent.prompt import agent_prompt, prompt_hash
from rubricforge.export.convert import drtulu
from rubricforge.export.convert.drb import flat_rubrics
from rubricforge.export.run import read_config, read_gates
from rubricforge.export.stats import _cost, _ratio
from rubricforge.extras import needs
from rubricforge.io.files import read_json
from rubricforge.io.stagelog import StageLog
from rubricforge.schema import KGExample

if TYPE_CHECKING:
    from datasets import Features

    from rubricforge.config import Config

KG_COLUMNS: dict[str, tuple[str, str]] = {
    "id": ("string", "subgraph id `kgp-NNNN`"),
    "question": ("string", "the multi-hop question (generated, obfuscated, rewritten)"),
    "answer": ("string", "the answer entity's name"),
    "answer_aliases": ("list of string", "other names of the answer (merged surface forms)"),
    "key_entities": ("list of string", "the subgraph's entities, answer included: the PRM entity set (MindDR §4.5)"),
    "hops": ("int", "hops in the subgraph (all branches)"),
    "shape": ("string", "chain or branch (two chains meeting at the answer)"),
    "difficulty": ("string", "easy, medium or hard (hops, entity rarity, single-search result)"),
    "difficulty_factors": ("string (JSON)", "the factors behind the label"),
    "subgraph": ("string (JSON)", "`{branches, edges: [{head, relation, tail, passage_id, evidence, source}], names}`"),
    "passage_ids": ("list of string", "the passages stating the hops"),
    "research_query": ("string", "long-form variant: research-style query from the entity path (empty when none)"),
    "race_rubrics": ("string (JSON)", "long-form variant: RACE rubrics `{query, dimension_weight, criterions}` ('' when none)"),
    "corpus_hash": ("string", "provenance: the corpus snapshot hash"),
    "models": ("string (JSON)", "provenance: role -> model name"),
    "prompt_hashes": ("string (JSON)", "provenance: prompt template -> content hash"),
}


def kg_row(ex: KGExample) -> dict[str, Any]:
    p = ex.path
    return {
        "id": ex.id, "question": ex.question, "answer": ex.answer, "answer_aliases": list(ex.answer_aliases),
        "key_entities": list(ex.key_entities), "hops": ex.hops, "shape": ex.shape, "difficulty": ex.difficulty,
        "difficulty_factors": json.dumps(ex.difficulty_factors, sort_keys=True),
        "subgraph": json.dumps({"branches": p.branches, "edges": [e.model_dump() for e in p.edges], "names": p.names},
                               ensure_ascii=False),
        "passage_ids": list(p.passage_ids), "research_query": ex.research_query,
        "race_rubrics": json.dumps(ex.race_rubrics.model_dump(mode="json"), ensure_ascii=False) if ex.race_rubrics else "",
        "corpus_hash": ex.corpus_hash, "models": json.dumps(ex.models, sort_keys=True),
        "prompt_hashes": json.dumps(ex.prompt_hashes, sort_keys=True),
    }


def drtulu_rows(ex: KGExample, source: str) -> dict[str, list[dict[str, Any]]]:
    """DR Tulu rows of one example: ``drtulu`` (the exact-answer row) and ``drtulu_rubric`` (the RACE variant)."""
    short = drtulu.from_rubricforge({"id": f"{ex.id}--short", "question": ex.question, "answer": ex.answer,
                                     "answer_aliases": ex.answer_aliases}, source)
    long = [] if ex.race_rubrics is None else [drtulu.from_rubricforge(
        {"id": f"{ex.id}--long", "question": ex.race_rubrics.query, "rubrics": flat_rubrics(ex.race_rubrics)}, source)]
    return {"drtulu": [short], "drtulu_rubric": long}


def kg_view_rows(examples: list[KGExample], source: str) -> dict[str, list[dict[str, Any]]]:
    return {"default": [kg_row(e) for e in examples],
            "drtulu": [r for e in examples for r in drtulu_rows(e, source)["drtulu"]],
            "drtulu_rubric": [r for e in examples for r in drtulu_rows(e, source)["drtulu_rubric"]],
            "trl": [{**kg_row(e), "prompt": agent_prompt(e.question), "system_prompt_hash": prompt_hash()}
                    for e in examples]}


def kg_features() -> dict[str, Features]:
    with needs("data"):
        from datasets import Features, Value

    strings = [Value("string")]
    types = {"string": Value("string"), "string (JSON)": Value("string"), "int": Value("int64"),
             "list of string": strings}
    main = {k: types[t] for k, (t, _) in KG_COLUMNS.items()}
    message = [{"role": Value("string"), "content": Value("string")}]
    drtulu = {"id": Value("string"), "source": Value("string"), "question_type": Value("string"),
              "messages": message, "ground_truth": Value("string"), "dataset": Value("string")}
    return {"default": Features(main), "drtulu": Features(drtulu), "drtulu_rubric": Features(drtulu),
            "trl": Features({**main, "prompt": message, "system_prompt_hash": Value("string")})}


def read_examples(run_dir: Path) -> list[KGExample]:
    path = run_dir / "kg_examples.jsonl"
    records = StageLog(path).records() if path.exists() else []
    return sorted((KGExample.model_validate(r["example"]) for r in records), key=lambda e: e.id)


def kg_stats(run_dir: Path, examples: list[KGExample], cfg: Config) -> dict[str, Any]:
    """Every number of the KG card (``dataset/stats.json``), from the manifest and the logs."""
    manifest = read_json(run_dir / "manifest.json")
    counts = manifest.get("counts") or {}
    graph = read_json(run_dir / "kg" / "graph_stats.json")
    questions = counts.get("questions", 0)
    drops = counts.get("drops") or {}
    models = manifest.get("models") or {}
    n = len(examples)
    return {
        "run": run_dir.resolve().name, "job": "kg", "pipeline": "kg",  # pipeline: job's name until the next release
        "corpus_hash": (manifest.get("corpus") or {}).get("hash", ""),
        "corpus_source": cfg.corpus.source,
        "models": {"generator": models.get("generator", ""), "judge": models.get("judge", "")},
        "counts": {**{k: counts.get(k, 0) for k in ("passages", "extracted", "extraction_failures", "triples",
                                                    "ungrounded_triples", "stated_edges", "paths", "sampling_attempts",
                                                    "questions", "longform")}, "retained": n},
        "graph": graph,
        "sampling": {"attempts": counts.get("sampling_attempts", 0), "rejected": counts.get("sampling_rejected") or {}},
        "drops": {r: {"count": c, "rate": _ratio(c, questions)} for r, c in sorted(drops.items())},
        "retained_rate": _ratio(n, questions),
        "judge_verdicts": dict(sorted((counts.get("judge_verdicts") or {}).items())),
        "hops": dict(sorted(Counter(e.hops for e in examples).items())),
        "shapes": dict(Counter(e.shape for e in examples)),
        "difficulty": {d: sum(1 for e in examples if e.difficulty == d) for d in ("easy", "medium", "hard")},
        "cost": _cost(manifest.get("ledger") or {}, n, 0),
        "empty_reason": None if n else _empty_reason(counts, drops),
    }


def _empty_reason(counts: dict[str, Any], drops: dict[str, int]) -> str:
    if not counts.get("paths"):
        return ("no subgraph passed the sampling constraints (see the rejections by constraint below; "
                "raise kg.sample_attempts or kg.extract_passages)")
    said = "; ".join(f"{c} {reason}" for reason, c in sorted(drops.items(), key=lambda x: -x[1]))
    return f"none of the {counts.get('questions', 0)} generated questions was retained: {said or 'see the viewer'}"


def export_kg_dataset(run_dir: str | Path, cfg: Config | None = None, push_to_hub: str | None = None,
                      examples: list[KGExample] | None = None, token: str | None = None) -> dict[str, Any]:
    """Write ``run_dir/dataset/`` for a KG run (``examples``: the run's, when the caller read them already; ``token``:
    as for :func:`~rubricforge.export.dataset.export_dataset`); returns ``{"path", "n_examples", "stats",
    "pushed_to"}``."""
    from rubricforge.export import hub
    from rubricforge.export.dataset import write_export
    from rubricforge.export.kg_card import render_kg_card

    run_dir = Path(run_dir)
    if push_to_hub is not None and token is None:
        token = hub.check_push(push_to_hub)
    cfg = cfg or read_config(run_dir)
    examples = read_examples(run_dir) if examples is None else examples
    stats = kg_stats(run_dir, examples, cfg)
    examples, stats["quality"] = read_gates(run_dir, examples)  # the job's gate stage ran (rubricforge.jobs.gates)
    rows = kg_view_rows(examples, source=f"rubricforge_{run_dir.resolve().name}")
    return write_export(run_dir, rows, kg_features(), stats, render_kg_card, len(examples), push_to_hub, token)
