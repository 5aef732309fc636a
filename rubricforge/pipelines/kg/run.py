"""The KG job's stages, resumable: :class:`KGRun`. :func:`rubricforge.jobs.kg.build_kg_dataset` runs them
and then the export (what ``rubricforge build --source kg`` runs).

In ``cfg.run_dir``::

    config.yaml            the resolved config (no secrets)
    kg_extractions.jsonl   key = passage id: grounded / ungrounded triples, or the failed call's error
    kg/graph.json          the graph (node-link JSON); kg/graph_stats.json its statistics
    kg_paths.json          the sampled subgraphs, sampling attempts and rejections per constraint
    kg_questions.jsonl     key = path id: initial, obfuscated and final question, or the drop reason
    kg_filters.jsonl       key = path id: each filter's result, the drop reason
    kg_longform.jsonl      key = path id: research query + RACE rubrics, or the error
    kg_examples.jsonl      the retained examples (rewritten from the logs at the end of every run)
    manifest.json          versions, corpus hash, models, prompt hashes, settings, counts, tokens per stage
    ledgers/               the invocation's LLM ledger and computed items

Every stage log holds one schema record per key (:class:`~rubricforge.schema.KGExtraction`,
:class:`~rubricforge.schema.KGQuestion`, :class:`~rubricforge.schema.KGFilterResults`,
:class:`~rubricforge.schema.KGLongform`), validated when it is read back.

Stage logs are appended item by item, so a killed run loses only the items in flight; the same
command reads them back and does the rest. An item (passage, subgraph) with an LLM call that failed
transiently after its retries (timeout, 429, 5xx, a dropped connection, empty ``choices``) is not logged:
the run ends with :class:`~rubricforge.errors.ItemsFailed`, and the same command redoes just those. The
graph needs every extraction, so a failed extraction ends the run before the graph is built. A budget
stop (:mod:`rubricforge.jobs.base`) ends the stages; :meth:`KGRun.finish` then writes the examples of the
subgraphs that are finished, so the job exports them. The graph and
the sample are rebuilt from the logs (no LLM call) and must match the logged sample's settings; a run
directory made with other settings is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubricforge.config import Config
from rubricforge.errors import ItemsFailed
from rubricforge.extras import needs
from rubricforge.llm.client import transient_failures
from rubricforge.llm.errors import Unavailable
from rubricforge.pipelines.kg.graph import EntityResolver, build_graph, node_id, save_graph, title_links
from rubricforge.pipelines.prompting import prompt_hashes
from rubricforge.io.files import atomic_write_json, atomic_write_text, read_json
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir, now
from rubricforge.schema import (KGExample, KGExtraction, KGFilterResults, KGLongform, KGPath, KGQuestion, Passage,
                                Record)

if TYPE_CHECKING:
    import networkx as nx

    from rubricforge.corpora.index_store import CorpusIndex

JOB_KIND = "kg"
GRAPH_FILE = Path("kg") / "graph.json"
PATHS_FILE = "kg_paths.json"
EXAMPLES_FILE = "kg_examples.jsonl"
LOGS: dict[str, type[Record]] = {"kg_extractions": KGExtraction, "kg_questions": KGQuestion,
                                 "kg_filters": KGFilterResults, "kg_longform": KGLongform}
SLICE_DEGREE = (2, 40)  # link degree of the articles whose passages the extractor reads


@dataclass
class KGSummary:
    """What a KG run did; the CLI prints it and the card reads it from the manifest."""

    run_dir: str
    status: str
    passages: int = 0  # scanned for title links
    extracted: int = 0  # passages read by the LLM extractor
    extraction_failures: int = 0
    triples: int = 0  # LLM triples kept (one sentence states them)
    ungrounded_triples: int = 0
    stated_edges: int = 0  # typed edges read off sentences without the LLM (source "text")
    graph: dict[str, Any] = field(default_factory=dict)
    paths: int = 0
    sampling_attempts: int = 0
    sampling_rejected: dict[str, int] = field(default_factory=dict)
    questions: int = 0  # paths that went through question generation
    drops: dict[str, int] = field(default_factory=dict)  # reason category -> count
    judge_verdicts: dict[str, int] = field(default_factory=dict)  # the derivation judge's verdicts
    retained: int = 0
    longform: int = 0  # retained examples with RACE rubrics
    computed_now: dict[str, int] = field(default_factory=dict)
    ledger: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    rows: int = 0  # the exported dataset's rows (set by the export, :func:`rubricforge.jobs.base.exported`)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """What the CLI prints about the stages and the export's rows."""
        g = self.graph
        drops = ", ".join(f"{k} {v}" for k, v in sorted(self.drops.items())) or "none"
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(self.judge_verdicts.items())) or "none"
        return [f"{self.status} in {self.seconds:.0f}s: passages {self.passages} (LLM-read {self.extracted}, "
                f"triples {self.triples}, stated edges {self.stated_edges}) · graph {g.get('nodes', 0)} nodes, "
                f"{g.get('edges', 0)} edges · subgraphs "
                f"{self.paths} ({self.sampling_attempts} tried) · questions {self.questions} · drops: {drops} · "
                f"judge: {verdicts} · "
                f"retained {self.retained} (long-form {self.longform}) · dataset rows {self.rows}",
                f"this call: {int(self.ledger.get('calls', 0))} LLM calls, "
                f"{int(self.ledger.get('prompt_tokens', 0)) + int(self.ledger.get('completion_tokens', 0))} tokens"]


def kg_settings(cfg: Config, corpus_hash: str, generator: str) -> dict[str, Any]:
    """Everything that shapes the graph and the sample; a run directory is only resumed under the same."""
    k = cfg.kg
    return {**k.model_dump(include={"seed", "extract_passages", "link_passages", "min_title_chars", "n_paths", "hops",
                                    "branch_every", "hub_exponent", "reach_k", "sample_attempts"}),
            "corpus_hash": corpus_hash, "generator_model": generator, "top_k": cfg.tools.top_k}


def extraction_slice(passages: list[Passage], link_degree: Counter[str], typed: set[str], n: int,
                     seed: int) -> list[Passage]:
    """``n`` passages (seeded) of articles that are linked but not hubs and already an end of a stated relation
    (``typed``), so the relations the LLM adds join the typed graph that walks move over."""
    lo, hi = SLICE_DEGREE
    pool = [p for p in passages if lo <= link_degree[node_id(p.title)] <= hi and node_id(p.title) in typed]
    return sorted(random.Random(seed).sample(pool, min(n, len(pool))), key=lambda p: p.id)


class KGRun:
    """One invocation of the KG stages in ``cfg.run_dir``: inside ``async with run.session()``, ``await
    run.stages()``; then ``run.finish(status)`` writes the examples, the summary and the manifest."""

    def __init__(self, cfg: Config, progress: bool):
        self.cfg, self.k, self.show_progress = cfg, cfg.kg, progress
        self.run_dir = RunDir(cfg.run_dir, JOB_KIND)
        self.started, self.invocation, self.t0 = now(), uuid.uuid4().hex[:12], time.monotonic()
        self.ledger_path = self.run_dir.ledger_path(self.invocation, uuid.uuid4().hex[:8])
        self.computed: Counter[str] = Counter()
        self.failures: list[str] = []  # the items whose LLM calls failed transiently (not logged)
        # what the stages reached (a run stopped early has a part of it)
        self.n_passages = 0
        self.chosen: list[str] = []
        self.graph_stats: dict[str, Any] = {}
        self.sampling: dict[str, Any] = {"attempts": 0, "rejected": {}, "paths": []}
        self.graph: nx.MultiDiGraph | None = None
        self.paths: list[KGPath] = []

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """The run directory checked, then the index, LLM client and tools the stages use, closed however they
        end (the invocation's ledger saved)."""
        from rubricforge.corpora.indexing import open_index
        from rubricforge.corpora.tools import ToolBox
        from rubricforge.llm import LLMClient

        self.run_dir.path.mkdir(parents=True, exist_ok=True)
        self.run_dir.check_kind()
        self.index = open_index(self.cfg, self.show_progress)
        self.client = LLMClient(self.cfg.llm)
        try:
            self.models = {r: self.client.model_name(r) for r in ("generator", "judge")}
            self.corpus_hash = self.index.corpus_hash
            self.settings = kg_settings(self.cfg, self.corpus_hash, self.models["generator"])
            self.logs: dict[str, StageLog[Any]] = {name: self.run_dir.log(name, model=m) for name, m in LOGS.items()}
            self.run_dir.check_settings("kg_settings", self.settings, any(len(log) for log in self.logs.values()),
                                        "KG work")
            self.run_dir.write_config(self.cfg)
            with ToolBox.from_config(self.cfg, index=self.index) as tools:
                self.tools = tools
                self._write_manifest("running")
                yield
        finally:
            self._save_ledger()
            await self.client.aclose()
            self.index.close()

    async def stages(self) -> None:
        """Extraction and graph, the sample, then each subgraph's question, filters and long form."""
        self.graph = await self._graph(self.index)
        self.paths = await self._sample(self.graph)
        await self._paths(self.paths, self.graph)
        if self.failures:
            raise ItemsFailed(self.failures)

    def finish(self, status: str) -> KGSummary:
        """The retained examples of what is finished, the summary and the manifest, for a run that ended ``status``."""
        examples = self._examples(self.paths, self.graph) if self.graph is not None else []
        summary = self._summary(status, examples)
        self._write_manifest(status, summary)
        return summary

    def _save_ledger(self) -> None:
        atomic_write_json(self.ledger_path, {"ledger": self.client.ledger.summary(), "computed": dict(self.computed)})

    # ---------------------------------------------------------- stages

    async def _graph(self, index: CorpusIndex) -> nx.MultiDiGraph:
        from rubricforge.pipelines.kg.extract import extract, triple_edges

        passages: list[Passage] = []
        for p in index.iter_passages():
            if self.k.link_passages is not None and len(passages) >= self.k.link_passages:
                break
            passages.append(p)
        resolver = EntityResolver()
        for p in passages:
            resolver.add_article(p)
        edges = title_links(passages, resolver, self.k.min_title_chars)
        degree: Counter[str] = Counter(n for e in edges if e.source == "link" for n in (e.head, e.tail))
        typed = {n for e in edges if e.source != "link" for n in (e.head, e.tail)}
        log = self.logs["kg_extractions"]
        chosen = extraction_slice(passages, degree, typed, self.k.extract_passages, self.k.seed)
        self.n_passages, self.chosen = len(passages), [p.id for p in chosen]
        with self._watch("kg extract", "kg_extractions", [p.id for p in chosen]):
            for p in chosen:
                if p.id not in log:
                    try:
                        await self._item("kg_extractions", p.id, extract(p, self.client, self.k.call_max_tokens))
                    except Unavailable as exc:
                        self.failures.append(str(exc))
                    self._save_ledger()
        if self.failures:  # the graph, and so the sample, needs every extraction
            raise ItemsFailed(self.failures)
        for p in chosen:
            edges += triple_edges(p, [t.model_dump() for t in log.finished(p.id).triples], resolver)
        g = build_graph(resolver.nodes, edges)
        g.remove_nodes_from([n for n in list(g) if g.degree(n) == 0 and g.nodes[n]["kind"] == "extracted"])
        self.graph_stats = save_graph(g, self.run_dir / str(GRAPH_FILE))
        return g

    async def _sample(self, g: nx.MultiDiGraph) -> list[KGPath]:
        from rubricforge.pipelines.kg.sampling import sample_paths

        path = self.run_dir / PATHS_FILE
        done = read_json(path)
        if done.get("settings") == self.settings:
            self.sampling = done
            return [KGPath.model_validate(p) for p in done["paths"]]
        # graph walks and a search per reachability check: on a thread, not on the event loop
        sampled = await asyncio.to_thread(sample_paths, g, self.k,
                                          lambda q, k: [s.passage_id for s in self.tools.search_snippets(q, k)])
        self.sampling = {"settings": self.settings, "attempts": sampled.attempts, "rejected": dict(sampled.rejected),
                         "rejection_examples": sampled.examples,
                         "paths": [p.model_dump(mode="json") for p in sampled.paths]}
        atomic_write_json(path, self.sampling)
        return sampled.paths

    async def _paths(self, paths: list[KGPath], g: nx.MultiDiGraph) -> None:
        with self._watch("kg questions", "kg_questions", [p.id for p in paths], also=("kg_filters", "kg_longform")):
            for path in paths:
                try:
                    await self._one(path, g)
                except Unavailable as exc:  # the subgraph's finished stages are kept; a re-run does the rest
                    self.failures.append(str(exc))
                self._save_ledger()
                self._write_manifest("running")

    async def _one(self, path: KGPath, g: nx.MultiDiGraph) -> None:
        from rubricforge.pipelines.kg.filters import run_filters
        from rubricforge.pipelines.kg.longform import write_longform
        from rubricforge.pipelines.kg.questions import write_question

        q_log, f_log, l_log = (self.logs[n] for n in ("kg_questions", "kg_filters", "kg_longform"))
        aliases = {n: g.nodes[n]["aliases"] for n in path.names}
        if path.id not in q_log:
            profile = " ".join(filter(None, (g.nodes[path.answer].get(k) for k in ("description", "lead"))))
            await self._item("kg_questions", path.id, write_question(path, aliases, profile, self.client,
                                                                     self.k.call_max_tokens, self.k.question_writer,
                                                                     self.k.question_rewrite))
        question = q_log.finished(path.id)
        if question.drop:
            return
        if path.id not in f_log:
            await self._item("kg_filters", path.id, run_filters(
                question.question, path, aliases[path.answer] + [path.names[path.answer]],
                g.nodes[path.answer]["passage_ids"], self.client, self.tools, list(self.k.filters),
                self.k.call_max_tokens))
        if f_log.finished(path.id).drop or not self.k.longform or path.id in l_log:
            return
        await self._item("kg_longform", path.id, write_longform(path, question.question, self.client,
                                                           self.k.longform_max_tokens))

    async def _item(self, name: str, key: str, work: Awaitable[dict[str, Any]]) -> None:
        """Log the record ``work`` computes for ``key`` in stage log ``name``; raise Unavailable instead when one
        of its LLM calls failed transiently (the item is not finished)."""
        with transient_failures() as failures:
            record = await work
        failures.check(key)
        self.logs[name].add(key, LOGS[name].model_validate(record))
        self.computed[name.removeprefix("kg_")] += 1

    def _examples(self, paths: list[KGPath], g: nx.MultiDiGraph) -> list[KGExample]:
        """The retained examples, written to ``kg_examples.jsonl``."""
        with needs("data"):
            import networkx as nx

        from rubricforge.pipelines.kg.difficulty import difficulty

        und = nx.Graph(g)
        sorted_degrees = sorted(d for _, d in und.degree())
        hashes = {n: h for n, h in prompt_hashes().items() if n.startswith("kg_")}
        out = []
        for path in paths:
            q, f = self.logs["kg_questions"].item(path.id), self.logs["kg_filters"].item(path.id)
            if not q or q.drop or not f or f.drop:
                continue
            nodes = list(dict.fromkeys(n for b in path.branches for n in b))
            label, factors = difficulty(path.hops, [und.degree(n) for n in nodes], sorted_degrees,
                                        f.answer_passage_retrieved)
            longform = self.logs["kg_longform"].item(path.id)
            race = longform.race if longform else None
            answer = path.names[path.answer]
            out.append(KGExample(
                id=path.id, question=q.question, answer=answer,
                answer_aliases=[a for a in g.nodes[path.answer]["aliases"] if a != answer],
                key_entities=[path.names[n] for n in nodes], hops=path.hops, shape=path.shape, difficulty=label,
                difficulty_factors=factors, path=path, research_query=race.query if race else "", race_rubrics=race,
                corpus_hash=self.corpus_hash, models=self.models, prompt_hashes=hashes))
        atomic_write_text(self.run_dir / EXAMPLES_FILE,
                          "".join(json.dumps({"key": e.id, "example": e.model_dump(mode="json")}, ensure_ascii=False)
                                  + "\n" for e in out))
        return out

    # ---------------------------------------------------------- summary, manifest, progress

    def _summary(self, status: str, examples: list[KGExample]) -> KGSummary:
        from rubricforge.pipelines.kg.filters import drop_category, judge_verdict

        ext = [r for pid in self.chosen if (r := self.logs["kg_extractions"].item(pid)) is not None]
        paths = [KGPath.model_validate(p) for p in self.sampling["paths"]]
        drops: Counter[str] = Counter()
        verdicts: Counter[str] = Counter()
        for p in paths:
            for name in ("kg_questions", "kg_filters"):
                if (rec := self.logs[name].item(p.id)) and rec.drop:
                    drops[drop_category(rec.drop)] += 1
            if (f := self.logs["kg_filters"].item(p.id)) and (verdict := judge_verdict(f.results)):
                verdicts[verdict] += 1
        totals = self.run_dir.invocation_totals(self.invocation)
        return KGSummary(
            run_dir=str(self.run_dir.path), status=status, passages=self.n_passages, extracted=len(ext),
            extraction_failures=sum(1 for r in ext if r.error), triples=sum(len(r.triples) for r in ext),
            ungrounded_triples=sum(len(r.ungrounded) for r in ext),
            stated_edges=self.graph_stats.get("edges_by_source", {}).get("text", 0), graph=self.graph_stats,
            paths=len(paths),
            sampling_attempts=self.sampling["attempts"], sampling_rejected=self.sampling["rejected"],
            questions=sum(1 for p in paths if p.id in self.logs["kg_questions"]), drops=dict(drops),
            judge_verdicts=dict(verdicts),
            retained=len(examples), longform=sum(1 for e in examples if e.race_rubrics),
            computed_now=dict(self.computed), ledger=totals.get("ledger", {}).get("total", {}),
            seconds=round(time.monotonic() - self.t0, 1))

    def _write_manifest(self, status: str, summary: KGSummary | None = None) -> None:
        counts = {k: v for k, v in summary.to_dict().items() if k not in ("run_dir", "status", "ledger", "rows")} \
            if summary else {n: len(log) for n, log in self.logs.items()}
        self.run_dir.write_manifest(self.invocation, self.started, status, {
            "corpus": {"hash": self.corpus_hash, "index_dir": str(self.cfg.index_dir()),
                       "source": self.cfg.corpus.source},
            "models": self.models, "prompt_hashes": {n: h for n, h in prompt_hashes().items() if n.startswith("kg_")},
            "kg_settings": self.settings}, counts)

    def _watch(self, label: str, counted: str, wanted: list[str], also: tuple[str, ...] = ()):
        return self.run_dir.watch(label, counted, wanted, self.invocation, also, enabled=self.show_progress)
