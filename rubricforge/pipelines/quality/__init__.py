"""Quality gates on a dataset's questions, run by the job's gate stage before the export (:mod:`rubricforge.jobs.gates`;
docs/design.md: "verifier → quality gates → dataset"):

* :mod:`.decontam` drops a question that shares a normalised n-gram (13 by default) with a benchmark prompt, or
  whose embedding is within a cosine threshold of one — DeepResearch Bench's 100 prompts ship with the package
  (Apache-2.0, ``benchmarks/NOTICE.md``); ResearchQA, DRACO, HealthBench or any other prompt file the user
  provides (``quality.benchmark_files``) are checked too;
* :mod:`.dedup` drops a question within a cosine threshold of an earlier question of the same dataset or of a
  previous dataset (``quality.previous_datasets``).

:func:`apply_gates` takes ``(id, question)`` pairs, so the tree and KG exports share it; every dropped question
is reported with its gate, the matching benchmark item or question, the method and the score.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rubricforge.pipelines.quality.decontam import Decontaminator, benchmark_items
from rubricforge.pipelines.quality.dedup import dedup, previous_questions

if TYPE_CHECKING:
    import numpy as np

    from rubricforge.config import Config

Embed = Callable[[Sequence[str]], "np.ndarray"]


@dataclass
class GateReport:
    dropped: dict[str, dict[str, Any]] = field(default_factory=dict)  # example id -> why
    summary: dict[str, Any] = field(default_factory=dict)  # what the card prints


def default_embed(cfg: Config) -> Embed:
    """The configured embedding model (L2-normalised rows: inner product = cosine), one per process and config."""
    embedder = _embedder(cfg.embedding.model_dump_json())
    return lambda texts: embedder.embed_queries(list(texts))


@functools.lru_cache(maxsize=4)
def _benchmark_vectors(embedding_json: str, prompts: tuple[str, ...]) -> np.ndarray:
    """The benchmark prompts' embeddings, computed once per process (the export runs once per build)."""
    return _embedder(embedding_json).embed_queries(list(prompts))


@functools.lru_cache(maxsize=2)
def _embedder(embedding_json: str) -> Any:
    from rubricforge.config import EmbeddingConfig
    from rubricforge.corpora.embedding import Embedder

    return Embedder.from_config(EmbeddingConfig.model_validate_json(embedding_json))


def apply_gates(items: Sequence[tuple[str, str]], cfg: Config, embed: Embed | None = None) -> GateReport:
    """Run the configured gates over ``(id, question)`` pairs; ``embed`` defaults to the configured model."""
    q = cfg.quality
    needs_model = (q.decontaminate and q.embedding_threshold is not None) or q.dedup_threshold is not None
    given = embed
    if embed is None and needs_model and items:
        embed = default_embed(cfg)
    report = GateReport()
    vectors = embed([text for _, text in items]) if embed is not None and needs_model and items else None
    if q.decontaminate:
        bench = benchmark_items(q.benchmarks, q.benchmark_files)
        gate = Decontaminator(bench, q.ngram, q.embedding_threshold, embed)
        if embed is not None and q.embedding_threshold is not None and given is None:
            gate.vectors = _benchmark_vectors(cfg.embedding.model_dump_json(), tuple(b.prompt for b in bench))
        for (id_, _), match in zip(items, gate.matches([t for _, t in items], vectors), strict=True):
            if match is not None:
                report.dropped[id_] = {"gate": "decontamination", **match}
        found = list(report.dropped.values())
        report.summary["decontamination"] = {
            "benchmarks": dict(Counter(b.benchmark for b in bench)), "ngram": q.ngram,
            "embedding_threshold": q.embedding_threshold, "checked": len(items), "dropped": len(found),
            "by_benchmark": dict(Counter(d["benchmark"] for d in found)),
            "by_method": dict(Counter(d["method"] for d in found))}
    if q.dedup_threshold is not None:
        previous = previous_questions(q.previous_datasets)
        alive = [i for i, (id_, _) in enumerate(items) if id_ not in report.dropped]
        if alive and vectors is not None and embed is not None:
            prev_vectors = embed(previous) if previous else None
            for id_, why in dedup([items[i][0] for i in alive], vectors[alive], q.dedup_threshold, previous,
                                  prev_vectors).items():
                report.dropped[id_] = {"gate": "dedup", **why}
        dups = [d for d in report.dropped.values() if d["gate"] == "dedup"]
        report.summary["dedup"] = {"threshold": q.dedup_threshold, "checked": len(alive),
                                   "previous_datasets": len(q.previous_datasets), "previous_questions": len(previous),
                                   "within": sum(d["method"] == "within" for d in dups),
                                   "previous": sum(d["method"] == "previous" for d in dups)}
    report.summary["dropped"] = [{"id": k, **v} for k, v in sorted(report.dropped.items())]
    return report
