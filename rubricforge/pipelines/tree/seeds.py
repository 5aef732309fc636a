"""Seed topics for evidence trees (DeepRubric Alg. 1 line 3, App. C.2 step 1).

One seed per *document* (its first passage), stratified by the document's topic label
(``metadata["topic"]``; a corpus without labels is one stratum): the topics are put in a random
order, each topic's documents are shuffled, and seeds are drawn round-robin over the topics until
``n`` are taken or every document is used. No document is drawn twice. Everything is derived from
``random.Random(seed)`` and the corpus order, so the same seed and corpus give the same seeds, and a
larger ``n`` extends a smaller one (the first ``n`` seeds never change), which lets a re-run with more
trees keep its finished trees.

The root query of a tree is the seed document's title (its first words when it has no title): the
broad research topic that the decomposition refines.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from itertools import zip_longest
from pathlib import Path

from pydantic import BaseModel

from rubricforge.errors import UserError
from rubricforge.io.files import atomic_write_json, read_json
from rubricforge.schema import Passage

SEEDS_FILE = "seeds.json"
UNLABELLED = ""
ROOT_QUERY_WORDS = 12


class Seed(BaseModel):
    index: int  # position in the draw; tree ids derive from it
    passage_id: str
    doc_id: str
    title: str
    topic: str
    query: str  # the tree's root query


def root_query(passage: Passage) -> str:
    return passage.title.strip() or " ".join(passage.text.split()[:ROOT_QUERY_WORDS])


def documents_by_topic(passages: Iterable[Passage]) -> dict[str, list[Passage]]:
    """The first passage of every document, grouped by topic label, in corpus order."""
    seen: set[str] = set()
    groups: dict[str, list[Passage]] = {}
    for p in passages:
        doc = p.doc_id or p.id
        if doc in seen:
            continue
        seen.add(doc)
        topic = str(p.metadata.get("topic") or UNLABELLED).strip()
        groups.setdefault(topic, []).append(p)
    return groups


def sample_seeds(passages: Iterable[Passage], n: int, seed: int) -> list[Seed]:
    """Up to ``n`` seeds, stratified round-robin over topics (see the module docstring)."""
    groups = documents_by_topic(passages)
    rng = random.Random(seed)
    topics = sorted(groups)
    rng.shuffle(topics)
    for topic in topics:  # shuffled in the (seeded) topic order, so each stratum's draw is reproducible
        rng.shuffle(groups[topic])
    draws = (p for rnd in zip_longest(*(groups[t] for t in topics)) for p in rnd if p is not None)
    out: list[Seed] = []
    for i, p in zip(range(n), draws, strict=False):
        out.append(Seed(index=i, passage_id=p.id, doc_id=p.doc_id or p.id, title=p.title,
                        topic=str(p.metadata.get("topic") or UNLABELLED).strip(), query=root_query(p)))
    return out


def load_or_sample_seeds(run_dir: str | Path, passages: Iterable[Passage], *, n: int, seed: int,
                         corpus_hash: str) -> list[Seed]:
    """The run's seeds: read from ``seeds.json`` when it covers ``n`` for the same seed and corpus,
    else drawn (the draw extends the stored one) and saved."""
    path = Path(run_dir) / SEEDS_FILE
    if path.is_file():
        stored = _read(path)
        if stored["seed"] != seed or stored["corpus_hash"] != corpus_hash:
            what = "build.seed" if stored["seed"] != seed else "corpus (snapshot hash)"
            raise UserError(f"{path} was drawn with a different {what} than this run uses",
                            "use a new run directory (--set run_dir=runs/<new>) or the same settings")
        seeds = [Seed.model_validate(s) for s in stored["seeds"]]
        if len(seeds) >= n or stored.get("exhausted"):
            return seeds[:n]
    seeds = sample_seeds(passages, n, seed)
    if not seeds:
        raise UserError("the corpus has no passages to draw seed topics from",
                        "check corpus.source / corpus.path and rebuild the index with `rubricforge corpus build`")
    atomic_write_json(path, {"seed": seed, "corpus_hash": corpus_hash, "exhausted": len(seeds) < n,
                             "topics": _topic_counts(seeds), "seeds": [s.model_dump() for s in seeds]})
    return seeds


def _topic_counts(seeds: list[Seed]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in seeds:
        counts[s.topic] = counts.get(s.topic, 0) + 1
    return counts


def _read(path: Path) -> dict:
    fix = "delete it to draw the seeds again"
    data = read_json(path, fix)
    if not isinstance(data.get("seeds"), list):
        raise UserError(f"{path} is not a valid seeds file (no seed list)", fix)
    return data
