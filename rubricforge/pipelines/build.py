"""Stages 1–3 of the main job, resumable: ``run_build(cfg)``. :func:`rubricforge.jobs.build_dataset`
runs it and then the export (what ``rubricforge build`` runs).

In ``cfg.run_dir``::

    config.yaml      the resolved config (no secrets)
    seeds.json       the seed topics (a re-run uses the same ones)
    trees.jsonl      stage 1: key = tree id, "tree" = EvidenceTree
    candidates.jsonl stage 2: key = candidate id, "candidate" = Candidate (rule-checked)
    verdicts.jsonl   stage 3: key = candidate id, "verification" = Verification
    manifest.json    versions, corpus hash, models, prompt hashes, counts, tokens and cost per stage

Each finished item is appended to its log at once, so a killed run loses at most the items in
flight; the same command then reads the logs back and does only what is missing (the LLM cache
answers the calls the killed run had already made). Trees run concurrently, at most
``build.tree_concurrency`` at a time; each goes through the three stages on its own.

Decisions:

* Ablation (``build.rubric_source`` = ``closed-book`` | ``search``, DeepRubric §4.4): the queries
  are the tree pipeline's — the tree candidate is generated (and kept in ``candidates.jsonl`` under
  its own id) and its question is given to the baseline, whose candidate is the one verified.
* A candidate that fails the deterministic rule checks is not sent to the verifier: it could not
  be retained anyway (a REVISE cannot repair the original's failures, see
  :func:`~rubricforge.pipelines.verification.final_example`), so it stays in ``candidates.jsonl``
  with its ``rule_failures`` and has no verdict.
* A generator whose every call so far failed (checked when a tree or a candidate is finished)
  stops the run with a message that suggests a stronger model; nothing it produced is saved.
* The tree-shaping settings (seed, depth, branching, budgets, corpus, generator model) are
  recorded; resuming a run directory that holds trees made with other settings is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import platform
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rubricforge.config import Config
from rubricforge.errors import BudgetExceeded, UserError
from rubricforge.pipelines.prompting import prompt_hashes
from rubricforge.pipelines.seeds import Seed, load_or_sample_seeds
from rubricforge.rundir import StageLog, atomic_write_json, atomic_write_text
from rubricforge.schema import Candidate, EvidenceTree, Verification

if TYPE_CHECKING:
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.llm import LLMClient

VERSIONED_PACKAGES = ("rubricforge", "pydantic", "litellm", "llama_cpp_python", "sentence-transformers", "torch",
                      "faiss-cpu", "datasets")


@dataclass
class BuildSummary:
    """What a build did; the CLI prints it."""

    run_dir: str
    status: str  # complete | stopped: <reason>
    trees: int = 0
    nodes: int = 0
    leaves: int = 0
    dropped_children: int = 0  # proposals dropped as redundant or ungrounded
    candidates: int = 0
    rule_failures: int = 0  # candidates that failed the rule checks (not verified)
    verified: int = 0
    decisions: dict[str, int] = field(default_factory=dict)  # KEEP / REVISE / DROP / UNPARSEABLE
    retained: int = 0  # verdicts in build.keep_decisions whose revision (if any) passed the rule checks
    computed_now: dict[str, int] = field(default_factory=dict)  # trees / candidates / verdicts made by this call
    ledger: dict[str, Any] = field(default_factory=dict)  # this call's totals: calls, tokens, cost, cache hits
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_build(cfg: Config, progress: bool = True) -> BuildSummary:
    """Run (or resume) stages 1–3 in ``cfg.run_dir``; see the module docstring."""
    return asyncio.run(_Build(cfg, progress).run())


def tree_id_for(seed: Seed) -> str:
    return f"tree-{seed.index:04d}"


def tree_settings(cfg: Config, corpus_hash: str, generator_model: str) -> dict[str, Any]:
    """Everything that shapes a tree; a run directory's trees are only reused under the same settings."""
    b = cfg.build
    return {"seed": b.seed, "max_depth": b.max_depth, "branching": list(b.branching), "max_nodes": b.max_nodes,
            "passages_per_node": b.passages_per_node, "redundancy_threshold": b.redundancy_threshold,
            "node_max_tokens": b.node_max_tokens, "corpus_hash": corpus_hash, "generator_model": generator_model,
            "embedding_model": cfg.embedding.model}


class _CountingClient:
    """The LLM client, counting valid and failed structured calls per role (garbage detection)."""

    def __init__(self, client: LLMClient):
        self._client = client
        self.ok: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.last_error: dict[str, str] = {}

    async def generate(self, role: str, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        res = await self._client.generate(role, messages, **kwargs)
        (self.ok if res.ok else self.failed)[role] += 1
        if not res.ok:
            self.last_error[role] = res.error or "no output"
        return res

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _Build:
    def __init__(self, cfg: Config, progress: bool):
        self.cfg, self.show_progress = cfg, progress
        self.run_dir = Path(cfg.run_dir)
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.invocation = uuid.uuid4().hex[:12]
        self.t0 = time.monotonic()
        self.computed: Counter[str] = Counter()

    # ---------------------------------------------------------- the run

    async def run(self) -> BuildSummary:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        index = _open_or_build_index(self.cfg, self.show_progress)
        try:
            status = await self._run(index)
        finally:
            index.close()
        return self._finish(status)

    async def _run(self, index: CorpusIndex) -> str:
        """Stages 1–3 for every seed; returns the run's status."""
        from rubricforge.corpora.tools import ToolBox
        from rubricforge.llm import LLMClient
        from rubricforge.pipelines.evidence_tree import TreeBuilder

        self.corpus_hash = index.corpus_hash
        self.seeds = load_or_sample_seeds(self.run_dir, index.iter_passages(), n=self.cfg.build.n_trees,
                                          seed=self.cfg.build.seed, corpus_hash=self.corpus_hash)
        self.trees, self.candidates, self.verdicts = (StageLog(self.run_dir / f"{n}.jsonl")
                                                      for n in ("trees", "candidates", "verdicts"))
        self.client = _CountingClient(LLMClient(self.cfg.llm))
        self.models = {role: self.client.model_name(role) for role in ("generator", "verifier")}
        self.settings = tree_settings(self.cfg, self.corpus_hash, self.models["generator"])
        self._check_resumable()
        atomic_write_text(self.run_dir / "config.yaml", yaml.safe_dump(self.cfg.public_dict(), sort_keys=False))
        try:
            with ToolBox.from_config(self.cfg, index=index) as tools, self._progress():
                self.tools = tools
                self.builder = TreeBuilder(self.cfg, self.client, tools, index.embed_queries, self.corpus_hash)
                self._write_manifest("running")
                try:
                    await self._run_trees()
                finally:
                    self.builder.close()
        except BudgetExceeded as exc:
            return f"stopped: {exc}"
        except UserError as exc:
            self._write_manifest(f"failed: {exc}")
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            self._write_manifest("interrupted")
            raise
        finally:
            await self.client.aclose()
        return "complete"

    async def _run_trees(self) -> None:
        """Every seed's tree through the three stages, ``build.tree_concurrency`` trees at a time; the
        first failure cancels the others (their finished items are already logged)."""
        sem = asyncio.Semaphore(self.cfg.build.tree_concurrency)
        refresher = asyncio.create_task(self._refresh_loop())
        try:
            async with asyncio.TaskGroup() as group:
                for seed in self.seeds:
                    group.create_task(self._one_tree(seed, sem))
        except BaseExceptionGroup as eg:
            raise eg.exceptions[0] from None
        finally:
            refresher.cancel()
            self.refresh_progress()

    async def _one_tree(self, seed: Seed, sem: asyncio.Semaphore) -> None:
        async with sem:
            tree = await self._stage1(seed)
            candidate = await self._stage2(tree)
            await self._stage3(candidate, tree)
            self._write_manifest("running")

    async def _stage1(self, seed: Seed) -> EvidenceTree:
        key = tree_id_for(seed)
        if (done := self.trees.get(key)) is not None:
            return EvidenceTree.model_validate(done["tree"])
        tree = await self.builder.build(key, seed)
        self._check_generator()
        self.trees.append(key, {"tree": tree.model_dump(mode="json")})
        self.computed["trees"] += 1
        return tree

    async def _stage2(self, tree: EvidenceTree) -> Candidate:
        from rubricforge.pipelines.synthesis import candidate_id

        source = self.cfg.build.rubric_source
        if (done := self.candidates.get(candidate_id(tree.id, source))) is not None:
            return Candidate.model_validate(done["candidate"])
        tree_candidate = await self._candidate(tree, "tree")
        if source == "tree":
            return tree_candidate
        return await self._candidate(tree, source, question=tree_candidate.question, why=tree_candidate.generation_error)

    async def _candidate(self, tree: EvidenceTree, source: str, question: str = "", why: str | None = None) -> Candidate:
        """Generate, rule-check and log one candidate (or read it back)."""
        from rubricforge.pipelines.baselines import baseline_candidate
        from rubricforge.pipelines.rules import check_rules
        from rubricforge.pipelines.synthesis import candidate_id, synthesize

        key = candidate_id(tree.id, source)
        if (done := self.candidates.get(key)) is not None:
            return Candidate.model_validate(done["candidate"])
        if source == "tree":
            candidate = await synthesize(tree, self.client, self.cfg)
        elif not question.strip():
            candidate = Candidate(id=key, tree_id=tree.id, rubric_source=source, question="",
                                  generation_error=f"no question to write {source} rubrics for: the tree candidate "
                                                   f"failed ({why or 'empty question'})")
        else:
            candidate = await baseline_candidate(tree, source, question, self.client, self.tools, self.cfg)
        self._check_generator()
        check_rules(candidate, tree, self.cfg)
        self.candidates.append(key, {"candidate": candidate.model_dump(mode="json")})
        self.computed["candidates"] += 1
        return candidate

    async def _stage3(self, candidate: Candidate, tree: EvidenceTree) -> None:
        from rubricforge.pipelines.verification import verify

        if candidate.rule_failures or candidate.id in self.verdicts:
            return
        verification = await verify(candidate, tree, self.client, self.cfg)
        self.verdicts.append(candidate.id, {"verification": verification.model_dump(mode="json")})
        self.computed["verdicts"] += 1

    # ---------------------------------------------------------- checks

    def _check_generator(self) -> None:
        """Stop when every generator call so far failed: the model cannot do this job."""
        ok, failed = self.client.ok["generator"], self.client.failed["generator"]
        if ok == 0 and failed:
            last = _clip(self.client.last_error.get("generator", ""), 160)
            raise UserError(f"the generator model ({self.models['generator']}) returned no valid JSON in {failed} "
                            f"calls (last error: {last})",
                            "try a stronger model with --set llm.generator.model=... (see `rubricforge llm check`)")

    def _check_resumable(self) -> None:
        previous = _read_json(self.run_dir / "manifest.json").get("tree_settings")
        if not previous or not len(self.trees) or previous == self.settings:
            return
        changed = ", ".join(f"{k}: {previous.get(k)!r} -> {v!r}" for k, v in self.settings.items() if previous.get(k) != v)
        raise UserError(f"{self.run_dir} holds trees made with other settings ({changed})",
                        "use a new run directory (--set run_dir=runs/<new>) or the same settings to resume")

    # ---------------------------------------------------------- summary, manifest, progress

    def _finish(self, status: str) -> BuildSummary:
        summary = self._summary(status)
        self._write_manifest(status, summary)
        return summary

    def _summary(self, status: str) -> BuildSummary:
        from rubricforge.pipelines.serialize import leaf_nodes

        wanted = {tree_id_for(s) for s in self.seeds}
        trees = [EvidenceTree.model_validate(r["tree"]) for k, r in _items(self.trees) if k in wanted]
        source = self.cfg.build.rubric_source
        candidates = [Candidate.model_validate(r["candidate"]) for _, r in _items(self.candidates)]
        candidates = [c for c in candidates if c.rubric_source == source and c.tree_id in wanted]
        verdicts = [Verification.model_validate(self.verdicts.get(c.id)["verification"])
                    for c in candidates if c.id in self.verdicts]
        decisions = Counter(v.decision for v in verdicts)
        keep = set(self.cfg.build.keep_decisions)
        retained = sum(1 for v in verdicts if v.decision in keep and not (v.decision == "REVISE" and v.rule_failures))
        summary = BuildSummary(
            run_dir=str(self.run_dir), status=status, trees=len(trees), nodes=sum(len(t.nodes) for t in trees),
            leaves=sum(len(leaf_nodes(t)) for t in trees), dropped_children=sum(len(t.dropped) for t in trees),
            candidates=len(candidates), rule_failures=sum(1 for c in candidates if c.rule_failures),
            verified=len(verdicts), decisions=dict(decisions), retained=retained,
            computed_now=dict(self.computed), ledger=self.client.ledger.summary().get("total", {}),
            seconds=round(time.monotonic() - self.t0, 1))
        if self.client.failed["verifier"] and not self.client.ok["verifier"]:
            summary.warnings.append(f"the verifier model ({self.models['verifier']}) returned no valid JSON in "
                                    f"{self.client.failed['verifier']} calls; try --set llm.verifier.model=...")
        if len(self.seeds) < self.cfg.build.n_trees:
            summary.warnings.append(f"the corpus has only {len(self.seeds)} documents to seed trees "
                                    f"(build.n_trees={self.cfg.build.n_trees})")
        return summary

    def _write_manifest(self, status: str, summary: BuildSummary | None = None) -> None:
        path = self.run_dir / "manifest.json"
        previous = _read_json(path)
        invocations = [i for i in previous.get("invocations", []) if i.get("id") != self.invocation]
        invocations.append({"id": self.invocation, "started": self.started, "updated": _now(), "status": status,
                            "ledger": self.client.ledger.summary()})
        if summary is not None:
            counts = summary.to_dict()
            for key in ("run_dir", "status", "ledger", "warnings"):
                counts.pop(key, None)
        else:  # while running: cheap counts (the full summary reads every log)
            counts = {"trees": len(self.trees), "candidates": len(self.candidates), "verified": len(self.verdicts),
                      "computed_now": dict(self.computed)}
        atomic_write_json(path, {
            "status": status, "run_dir": str(self.run_dir), "updated": _now(), "versions": _versions(),
            "corpus": {"hash": self.corpus_hash, "index_dir": str(self.cfg.index_dir()), "source": self.cfg.corpus.source},
            "models": self.models, "prompt_hashes": prompt_hashes(), "tree_settings": self.settings,
            "rubric_source": self.cfg.build.rubric_source, "counts": counts,
            "ledger": _sum_ledgers([i["ledger"] for i in invocations]), "invocations": invocations,
        })

    @contextlib.contextmanager
    def _progress(self):
        self.bar = self.bar_task = None
        if not self.show_progress:
            yield
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]build"), BarColumn(bar_width=20), MofNCompleteColumn(), TextColumn("trees"),
                      TimeElapsedColumn(), TextColumn("{task.fields[stats]}"), console=Console(stderr=True),
                      refresh_per_second=2) as bar:
            self.bar, self.bar_task = bar, bar.add_task("build", total=len(self.seeds), stats="")
            yield

    async def _refresh_loop(self) -> None:
        while True:
            self.refresh_progress()
            await asyncio.sleep(1.0)

    def refresh_progress(self) -> None:
        if self.bar is None:
            return
        total = self.client.ledger.summary().get("total", {})
        tokens = int(total.get("prompt_tokens", 0)) + int(total.get("completion_tokens", 0))
        done = sum(1 for s in self.seeds if tree_id_for(s) in self.trees)
        self.bar.update(self.bar_task, completed=done, stats=(
            f"cand {len(self.candidates)} · verdicts {len(self.verdicts)} · {int(total.get('calls', 0))} calls · "
            f"{tokens / 1000:.1f}k tok · ${float(total.get('cost_usd', 0.0)):.4f}"))


# ---------------------------------------------------------------- helpers


def _open_or_build_index(cfg: Config, progress: bool) -> CorpusIndex:
    from rubricforge.corpora.build import build_index
    from rubricforge.corpora.index_store import META_FILE, CorpusIndex

    if not (cfg.index_dir() / META_FILE).is_file():
        build_index(cfg, progress=progress)
    index = CorpusIndex.from_config(cfg)
    if len(index) == 0:
        raise UserError(f"the corpus index in {cfg.index_dir()} holds no passages",
                        "check corpus.source / corpus.path and run `rubricforge corpus build`")
    return index


def _items(log: StageLog) -> list[tuple[str, dict[str, Any]]]:
    return [(r["key"], r) for r in log.records()]


def _read_json(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sum_ledgers(ledgers: list[dict[str, Any]]) -> dict[str, Any]:
    """Numbers summed key by key through nested dicts (the run's total over all its invocations)."""
    out: dict[str, Any] = {}
    for ledger in ledgers:
        for key, value in ledger.items():
            if isinstance(value, dict):
                out[key] = _sum_ledgers([out.get(key, {}), value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    return out


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
