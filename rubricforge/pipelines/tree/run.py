"""Stages 1–3 of the main job, resumable, in three parts: :func:`prepare_build` (seeds, checks, a
``running`` manifest) once, :class:`TreeWorker` for single trees (or single stages of them) in any
process, :func:`finish_build` (shards merged, the summary in the manifest) once. The job
(:mod:`rubricforge.jobs.tree`) runs them in this process; the Prefect flows (:mod:`rubricforge.flows`)
spread the trees over workers.

In ``cfg.run_dir`` (a :class:`~rubricforge.rundir.RunDir`)::

    config.yaml      the resolved config (no secrets)
    seeds.json       the seed topics (a re-run uses the same ones)
    trees.jsonl      stage 1: key = tree id, "tree" = EvidenceTree
    candidates.jsonl stage 2: key = candidate id, "candidate" = Candidate (rule-checked)
    verdicts.jsonl   stage 3: key = candidate id, "verification" = Verification
    *.shards/        a flow worker's own part of a stage log, merged into the log by finish_build
    manifest.json    versions, corpus hash, models, prompt hashes, counts, tokens and cost per stage
    ledgers/         one file per invocation and worker: its LLM ledger and computed items

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
  :func:`~rubricforge.pipelines.tree.verification.final_example`), so it stays in ``candidates.jsonl``
  with its ``rule_failures`` and has no verdict.
* A generator whose every call so far failed (checked when a tree or a candidate is finished)
  stops the run with a message that suggests a stronger model; nothing it produced is saved.
* An item (tree, candidate, verdict) with an LLM call that failed transiently after its retries
  (timeout, 429, 5xx, dropped connection, empty answer) is not logged: the other trees go on, the
  run ends with :class:`~rubricforge.errors.ItemsFailed`, and the same command redoes just those.
* A tree cut by invalid model answers (``tree.invalid_answers``: malformed JSON or a schema violation
  that outlasted the re-prompts) is logged but goes no further: it fails like a transient failure
  (:class:`TreeCut`), and the next run builds it again, its uncached calls sampled with another seed
  (:func:`~rubricforge.llm.client.resampled`), at most ``build.invalid_answer_retries`` times. A tree
  still cut then goes on; ``build.drop_incomplete_trees`` makes its candidate a rule failure.
* The tree-shaping settings (seed, depth, branching, budgets, corpus, generator model) are
  recorded; resuming a run directory that holds trees made with other settings is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rubricforge.config import Config, LLMConfig
from rubricforge.errors import UserError
from rubricforge.llm import LLMClient, LLMResult
from rubricforge.llm.client import Check, resampled, transient_failures
from rubricforge.llm.errors import Unavailable
from rubricforge.llm.limits import PRIORITY
from rubricforge.pipelines.prompting import prompt_hashes
from rubricforge.pipelines.tree.seeds import Seed, load_or_sample_seeds
from rubricforge.io.files import atomic_write_json
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir, now
from rubricforge.schema import Candidate, EvidenceTree, Verification
from rubricforge.text import one_line

if TYPE_CHECKING:
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.pipelines.tree.rules import Embed
    from rubricforge.llm.limits import LimitRegistry

JOB_KIND = "tree"
STAGES = ("trees", "candidates", "verdicts")  # the stage logs, in order
RECORDS = {"trees": (EvidenceTree, "tree"), "candidates": (Candidate, "candidate"),
           "verdicts": (Verification, "verification")}  # each log's record type and field


class TreeCut(Unavailable):
    """A tree cut by invalid model answers, logged and to be built again: like a transient failure, the item is
    not finished and the same command retries it."""


@dataclass
class BuildSummary:
    """What a build did; the CLI prints it."""

    run_dir: str
    status: str  # complete | stopped: <reason> | failed: <reason>
    trees: int = 0
    nodes: int = 0
    leaves: int = 0
    dropped_children: int = 0  # proposals dropped as redundant or ungrounded
    cut_trees: int = 0  # trees cut by invalid model answers (EvidenceTree.invalid_answers), built again on resume
    invalid_answers: int = 0  # over all trees
    candidates: int = 0
    rule_failures: int = 0  # candidates that failed the rule checks (not verified)
    verified: int = 0
    decisions: dict[str, int] = field(default_factory=dict)  # KEEP / REVISE / DROP / UNPARSEABLE
    retained: int = 0  # verified candidates the retention rule keeps (verification.is_retained)
    repairs: dict[str, dict[str, int]] = field(default_factory=dict)  # Table 7 category -> rewritten / removed
    target_rows: int = 0  # build.target_rows (0: none)
    computed_now: dict[str, int] = field(default_factory=dict)  # trees / candidates / verdicts made by this call
    ledger: dict[str, Any] = field(default_factory=dict)  # this call's totals: calls, tokens, cost, cache hits
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rows: int = 0  # the exported dataset's rows (set by the export, :func:`rubricforge.jobs.base.exported`)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """What the CLI prints about the stages and the export's rows."""
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(self.decisions.items())) or "none"
        tokens = int(self.ledger.get("prompt_tokens", 0)) + int(self.ledger.get("completion_tokens", 0))
        cut = f", cut {self.cut_trees} by {self.invalid_answers} invalid answers" if self.cut_trees else ""
        return [f"{self.status} in {self.seconds:.0f}s: trees {self.trees} (nodes {self.nodes}, leaves {self.leaves}{cut}) "
                f"· candidates {self.candidates} (rule failures {self.rule_failures}) · verified {self.verified} "
                f"({decisions}) · dataset rows {self.rows}"
                + (f" · {self.retained} of {self.target_rows} wanted rows retained after {self.trees} trees"
                   if self.target_rows else ""),
                f"this call: {int(self.ledger.get('calls', 0))} LLM calls, {tokens} tokens, "
                f"${float(self.ledger.get('cost_usd', 0.0)):.4f}",
                "deterministic repairs: " + (", ".join(f"{category} {n['rewritten']} rewritten / {n['removed']} removed"
                                                       for category, n in self.repairs.items()
                                                       if n["rewritten"] or n["removed"]) or "none")]


def stage_logs(run_dir: RunDir, shard: str | None = None) -> dict[str, StageLog[Any]]:
    """The three typed stage logs (``shard``: this worker's own part of each)."""
    return {name: run_dir.log(name, shard, *RECORDS[name]) for name in STAGES}


class TreeQuota:
    """Which seeds' trees to start, in seed order: while fewer than ``build.n_trees`` trees were started, up to
    ``build.tree_concurrency`` at a time; then only while fewer than ``build.target_rows`` rows are retained,
    with at most as many trees in flight as rows are still missing (so a run asked for one row builds one tree
    at a time and stops at the first row; a tree that failed counts as a row to come); never more than
    :meth:`~rubricforge.config.BuildConfig.tree_cap`.
    A run of single stages without the verdicts (the stage flows) works on the first ``build.n_trees`` trees."""

    def __init__(self, cfg: Config, stages: Sequence[str] = STAGES):
        self.b, self.started, self.retained, self.failed = cfg.build, 0, 0, 0
        self.target = self.b.target_rows if "verdicts" in stages else 0  # only a verdict makes a row

    def may_start(self, in_flight: int) -> bool:
        if self.started >= self.b.tree_cap():
            return False
        if self.started < self.b.n_trees:
            return in_flight < self.b.tree_concurrency
        missing = self.target - self.retained - self.failed
        return 0 < missing and in_flight < min(self.b.tree_concurrency, missing)

    def start(self) -> None:
        self.started += 1

    def finished(self, retained: bool | None) -> None:
        """A tree ended: retained as a row, not (False), or failed (None: the re-run redoes it, so no other seed
        is started in its place)."""
        self.retained += retained is True
        self.failed += retained is None


async def run_trees(run: Callable[[Seed], Awaitable[bool]], seeds: list[Seed], cfg: Config,
                    stages: Sequence[str] = STAGES) -> list[str]:
    """The seeds' trees through ``stages`` (``run(seed)``: one tree, in this process or as a Prefect task), as many
    and as concurrently as :class:`TreeQuota` allows; returns the errors of the trees whose LLM calls failed
    transiently (the others went on). Any other failure cancels the others (their finished items are already
    logged). The one admission loop of the tree job, whatever runs the trees."""
    quota, failures = TreeQuota(cfg, stages), list[str]()
    running: set[asyncio.Task[bool | None]] = set()

    async def one(seed: Seed) -> bool | None:
        try:
            return await run(seed)
        except Unavailable as exc:
            failures.append(str(exc))
            return None

    async def settle() -> None:
        nonlocal running
        done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            quota.finished(task.result())

    try:
        for seed in seeds:
            while running and not quota.may_start(len(running)):
                await settle()
            if not quota.may_start(len(running)):
                break
            quota.start()
            running.add(asyncio.create_task(one(seed)))
        while running:
            await settle()
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    return failures


def tree_id_for(seed: Seed) -> str:
    return tree_ids(seed.index + 1)[-1]


def progress_label(cfg: Config) -> str:
    """The progress bar's label: it counts trees up to ``build.tree_cap()``, which a row target may end early."""
    target = cfg.build.target_rows
    return f"build (until {target} row{'s' * (target != 1)})" if cfg.build.tree_cap() > cfg.build.n_trees else "build"


def tree_ids(n: int) -> list[str]:
    """The ids of a run's first ``n`` trees (seeds are numbered from 0)."""
    return [f"tree-{i:04d}" for i in range(n)]


def tree_settings(cfg: Config, corpus_hash: str, generator_model: str) -> dict[str, Any]:
    """Everything that shapes a tree; a run directory's trees are only reused under the same settings."""
    b = cfg.build
    return {"seed": b.seed, "max_depth": b.max_depth, "branching": list(b.branching), "max_nodes": b.max_nodes,
            "passages_per_node": b.passages_per_node, "redundancy_threshold": b.redundancy_threshold,
            "passage_gate": b.passage_gate, "node_max_tokens": b.node_max_tokens, "extract": b.extract,
            "corpus_hash": corpus_hash, "generator_model": generator_model,
            "embedding_model": cfg.embedding.model}


class _CountingClient(LLMClient):
    """The LLM client, counting valid and failed structured calls per role (garbage detection)."""

    def __init__(self, cfg: LLMConfig, limits: LimitRegistry | None = None):
        super().__init__(cfg, limits=limits)
        self.ok: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.last_error: dict[str, str] = {}

    async def generate(self, role: str, messages: list[dict[str, Any]], output: type[BaseModel] | None = None,
                       stage: str = "default", temperature: float | None = None,
                       max_tokens: int | None = None, seed: int | None = None, check: Check | None = None) -> LLMResult:
        res = await super().generate(role, messages, output, stage, temperature, max_tokens, seed, check)
        if res.transient:  # the provider's fault, not the model's: the item fails (see TreeWorker.run)
            return res
        (self.ok if res.ok else self.failed)[role] += 1
        if not res.ok:
            self.last_error[role] = res.error or "no output"
        return res


# ---------------------------------------------------------------- the run: prepare and finish


@dataclass
class BuildPlan:
    """What one invocation works on (plain data, so it can travel to other processes)."""

    run_dir: str
    invocation: str
    started: str
    seeds: list[Seed]
    corpus_hash: str
    models: dict[str, str]
    settings: dict[str, Any]


def prepare_build(cfg: Config, index: CorpusIndex | None = None, invocation: str | None = None) -> BuildPlan:
    """Seeds, the resume guards, ``config.yaml`` and a ``running`` manifest (opens ``index`` if not given)."""
    from rubricforge.corpora.indexing import open_index

    run_dir = RunDir(cfg.run_dir, JOB_KIND)
    run_dir.path.mkdir(parents=True, exist_ok=True)
    run_dir.check_kind()
    with contextlib.ExitStack() as stack:
        if index is None:
            index = stack.enter_context(open_index(cfg))
        seeds = load_or_sample_seeds(run_dir.path, index.iter_passages(), n=cfg.build.tree_cap(), seed=cfg.build.seed,
                                     corpus_hash=index.corpus_hash)
        corpus_hash = index.corpus_hash
    models = {role: cfg.llm.role(role).model for role in ("generator", "verifier")}
    plan = BuildPlan(str(run_dir.path), invocation or uuid.uuid4().hex[:12], now(), seeds, corpus_hash, models,
                     tree_settings(cfg, corpus_hash, models["generator"]))
    run_dir.check_settings("tree_settings", plan.settings, run_dir.has_records("trees"), "trees")
    run_dir.write_config(cfg)
    write_manifest(cfg, plan, "running")
    return plan


def finish_build(cfg: Config, plan: BuildPlan, status: str,
                 logs: dict[str, StageLog[Any]] | None = None) -> BuildSummary:
    """The workers' shards merged into the stage logs, then the summary of everything the run directory holds
    for the plan's seeds, also written to the manifest (``logs``: the in-process worker's, already read)."""
    logs = logs or stage_logs(RunDir(plan.run_dir, JOB_KIND))
    for log in logs.values():
        log.merge()
    summary = _summary(cfg, plan, status, logs)
    write_manifest(cfg, plan, status, summary)
    return summary


# ---------------------------------------------------------------- one process's share of the trees


class TreeWorker:
    """The index, tools, LLM client and tree builder of one process, running single trees of one invocation.

    ``run(seed, stages)`` takes a seed through the given stages (the others must be finished already)
    and logs each finished item at once (``sharded``: to this worker's own shard of each log, for workers
    of a flow). Its LLM ledger and counts go to ``ledgers/<invocation>--<worker>.json`` after every
    item, so the invocation's totals add up over every process that worked on it. ``limits`` replaces
    the client's in-process LLM limits (e.g. with limits shared by every worker of a cluster).
    """

    def __init__(self, cfg: Config, invocation: str, index: CorpusIndex | None = None,
                 limits: LimitRegistry | None = None, sharded: bool = False):
        from rubricforge.corpora.indexing import open_index
        from rubricforge.corpora.tools import ToolBox
        from rubricforge.pipelines.tree.evidence_tree import TreeBuilder

        self.cfg, self.run_dir, self.id = cfg, RunDir(cfg.run_dir, JOB_KIND), uuid.uuid4().hex[:8]
        self._own_index = index is None
        self.index = open_index(cfg) if index is None else index
        self.logs = stage_logs(self.run_dir, self.id if sharded else None)
        self.trees, self.candidates, self.verdicts = (self.logs[n] for n in STAGES)
        self.client = _CountingClient(cfg.llm, limits=limits)
        self.tools = ToolBox.from_config(cfg, index=self.index)
        self.builder = TreeBuilder(cfg, self.client, self.tools, self.index.aembed_queries, self.index.corpus_hash,
                                   embed_passages=self.index.aembed_passages)
        self.computed: Counter[str] = Counter()
        self.ledger_path = self.run_dir.ledger_path(invocation, self.id)

    async def run(self, seed: Seed, stages: Sequence[str] = STAGES) -> bool:
        """Take the seed's tree through ``stages``; returns whether it ended as a retained row. Raises
        BudgetExceeded when the budget is spent and Unavailable when an LLM call failed transiently (the item
        in flight is not logged)."""
        last = max(STAGES.index(s) for s in stages)
        PRIORITY.set(seed.index)  # this tree's LLM calls wait behind those of the trees admitted before it
        try:
            tree = await self._stage1(seed, "trees" in stages)
            if "trees" in stages and self._rebuild(tree):
                raise TreeCut(f"{tree.id}: {tree.invalid_answers} invalid model answer(s) cut the tree (build "
                              f"{tree.attempt + 1} of {self.cfg.build.invalid_answer_retries + 1})")
            if last >= 1:
                candidate = await self._stage2(tree, "candidates" in stages)
                if last >= 2:
                    return await self._stage3(candidate, tree)
        finally:
            self._save_ledger()
        return False

    async def aclose(self) -> None:
        self.tools.close()
        await self.client.aclose()
        if self._own_index:
            self.index.close()

    def _save_ledger(self) -> None:
        atomic_write_json(self.ledger_path, {"ledger": self.client.ledger.summary(), "computed": dict(self.computed),
                                             "ok": dict(self.client.ok), "failed": dict(self.client.failed)})

    @staticmethod
    def _missing(key: str, stage: str) -> UserError:
        return UserError(f"{key} has no finished {stage} record in the run directory",
                         f"run the stage before {stage} first (or the whole build)")

    def _rebuild(self, tree: EvidenceTree) -> bool:
        """Whether a tree cut by invalid answers is to be built again (by the next run, or task retry)."""
        return tree.invalid_answers > 0 and tree.attempt < self.cfg.build.invalid_answer_retries

    async def _stage1(self, seed: Seed, compute: bool) -> EvidenceTree:
        key = tree_id_for(seed)
        if (done := self.trees.item(key)) is not None and not (compute and self._rebuild(done)):
            return done
        if not compute:
            raise self._missing(key, "trees")
        attempt = done.attempt + 1 if done is not None else 0
        with transient_failures() as failures, resampled(attempt):
            tree = await self.builder.build(key, seed)
        tree.attempt = attempt
        failures.check(key)
        self._check_generator()
        self.trees.add(key, tree)
        self.computed["trees"] += 1
        return tree

    async def _stage2(self, tree: EvidenceTree, compute: bool) -> Candidate:
        from rubricforge.rubric_gen.criteria import candidate_id

        source = self.cfg.build.rubric_source
        if (done := self.candidates.item(candidate_id(tree.id, source))) is not None:
            return done
        if not compute:
            raise self._missing(tree.id, "candidates")
        tree_candidate = await self._candidate(tree, "tree")
        if source == "tree":
            return tree_candidate
        return await self._candidate(tree, source, question=tree_candidate.question, why=tree_candidate.generation_error)

    async def _candidate(self, tree: EvidenceTree, source: str, question: str = "", why: str | None = None) -> Candidate:
        """Generate, rule-check and log one candidate (or read it back)."""
        from rubricforge.pipelines.tree.repairs import repair_candidate
        from rubricforge.pipelines.tree.rules import check_rules
        from rubricforge.pipelines.tree.synthesis import synthesize
        from rubricforge.rubric_gen.baselines import baseline_candidate
        from rubricforge.rubric_gen.criteria import candidate_id

        key = candidate_id(tree.id, source)
        if (done := self.candidates.item(key)) is not None:
            return done
        with transient_failures() as failures:
            if source == "tree":
                candidate = await synthesize(tree, self.client, self.cfg, embed=self.index.embed_queries)
            elif not question.strip():
                candidate = Candidate(id=key, tree_id=tree.id, rubric_source=source, question="",
                                      generation_error=f"no question to write {source} rubrics for: the tree "
                                                       f"candidate failed ({why or 'empty question'})")
            else:
                candidate = await baseline_candidate(tree, source, question, self.client, self.tools, self.cfg)
        failures.check(key)
        self._check_generator()
        repair_candidate(candidate, tree, self.index.embed_queries)
        check_rules(candidate, tree, self.cfg, embed=self._coverage_embed())
        if tree.invalid_answers and self.cfg.build.drop_incomplete_trees:
            candidate.rule_failures.append(f"the tree was cut by {tree.invalid_answers} invalid model answer(s) "
                                           f"(build.drop_incomplete_trees)")
        self.candidates.add(key, candidate)
        self.computed["candidates"] += 1
        return candidate

    async def _stage3(self, candidate: Candidate, tree: EvidenceTree) -> bool:
        """Verify the candidate (or read its verdict back); returns whether it is retained."""
        from rubricforge.pipelines.tree.verification import is_retained, verify

        if candidate.rule_failures:
            return False
        if (verification := self.verdicts.item(candidate.id)) is None:
            with transient_failures() as failures:
                verification = await verify(candidate, tree, self.client, self.cfg, embed=self.index.embed_queries)
            failures.check(candidate.id)
            self.verdicts.add(candidate.id, verification)
            self.computed["verdicts"] += 1
        return is_retained(candidate, verification, self.cfg)

    def _coverage_embed(self) -> Embed | None:
        """The embedding the rule checks' coverage test uses (None: ``build.check_coverage`` is off)."""
        return self.index.embed_queries if self.cfg.build.check_coverage else None

    def _check_generator(self) -> None:
        """Stop when every generator call so far failed: the model cannot do this job."""
        ok, failed = self.client.ok["generator"], self.client.failed["generator"]
        if ok == 0 and failed:
            last = one_line(self.client.last_error.get("generator", ""), 160)
            raise UserError(f"the generator model ({self.client.model_name('generator')}) returned no valid JSON in "
                            f"{failed} calls (last error: {last})",
                            "try a stronger model with --set llm.generator.model=... (see `rubricforge llm check`)")


# ---------------------------------------------------------------- totals, summary, manifest


def _summary(cfg: Config, plan: BuildPlan, status: str, logs: dict[str, StageLog[Any]]) -> BuildSummary:
    from rubricforge.pipelines.tree.repairs import count_repairs
    from rubricforge.pipelines.tree.serialize import leaf_nodes
    from rubricforge.pipelines.tree.verification import is_retained
    from rubricforge.rubric_gen.criteria import candidate_id

    run_dir = RunDir(plan.run_dir, JOB_KIND)
    wanted = [tree_id_for(s) for s in plan.seeds]
    trees = [t for t in (logs["trees"].item(k) for k in wanted) if t is not None]
    candidates = [c for c in (logs["candidates"].item(candidate_id(k, cfg.build.rubric_source)) for k in wanted)
                  if c is not None]
    verified = [(c, v) for c, v in ((c, logs["verdicts"].item(c.id)) for c in candidates) if v is not None]
    verdicts = [v for _, v in verified]
    totals = run_dir.invocation_totals(plan.invocation)
    ok, failed = totals.get("ok", {}), totals.get("failed", {})
    summary = BuildSummary(
        run_dir=plan.run_dir, status=status, trees=len(trees), nodes=sum(len(t.nodes) for t in trees),
        leaves=sum(len(leaf_nodes(t)) for t in trees), dropped_children=sum(len(t.dropped) for t in trees),
        candidates=len(candidates), rule_failures=sum(1 for c in candidates if c.rule_failures),
        verified=len(verdicts), decisions=dict(Counter(v.decision for v in verdicts)),
        retained=sum(1 for c, v in verified if is_retained(c, v, cfg)), target_rows=cfg.build.target_rows,
        repairs=count_repairs([r for c in candidates for r in c.repairs] + [r for v in verdicts for r in v.repairs]),
        computed_now={k: int(v) for k, v in totals.get("computed", {}).items() if v},
        ledger=totals.get("ledger", {}).get("total", {}),
        cut_trees=sum(1 for t in trees if t.invalid_answers), invalid_answers=sum(t.invalid_answers for t in trees),
        seconds=round((datetime.now(timezone.utc) - datetime.fromisoformat(plan.started)).total_seconds(), 1))
    if failed.get("verifier") and not ok.get("verifier"):
        summary.warnings.append(f"the verifier model ({plan.models['verifier']}) returned no valid JSON in "
                                f"{int(failed['verifier'])} calls; try --set llm.verifier.model=...")
    if status == "complete" and summary.retained < cfg.build.target_rows:
        summary.warnings.append(f"only {summary.retained} of the {cfg.build.target_rows} rows wanted after "
                                f"{summary.trees} trees (at most {cfg.build.tree_cap()}: build.max_trees)")
    if len(plan.seeds) < cfg.build.n_trees:
        summary.warnings.append(f"the corpus has only {len(plan.seeds)} documents to seed trees "
                                f"(build.n_trees={cfg.build.n_trees})")
    if final := sum(1 for t in trees if t.invalid_answers and t.attempt >= cfg.build.invalid_answer_retries):
        summary.warnings.append(f"{final} tree(s) still cut by invalid model answers after "
                                f"{cfg.build.invalid_answer_retries} rebuild(s) (build.invalid_answer_retries): their "
                                + ("candidates fail the rule checks (build.drop_incomplete_trees)"
                                   if cfg.build.drop_incomplete_trees else
                                   "rows are kept (set build.drop_incomplete_trees=true to drop them)"))
    return summary


def write_manifest(cfg: Config, plan: BuildPlan, status: str, summary: BuildSummary | None = None) -> None:
    """The run's manifest (:meth:`RunDir.write_manifest`); the counts are the summary's, when given."""
    counts = None
    if summary is not None:
        counts = {k: v for k, v in summary.to_dict().items() if k not in ("run_dir", "status", "ledger", "warnings", "rows")}
    RunDir(plan.run_dir, JOB_KIND).write_manifest(plan.invocation, plan.started, status, {
        "corpus": {"hash": plan.corpus_hash, "index_dir": str(cfg.index_dir()), "source": cfg.corpus.source},
        "models": plan.models, "prompt_hashes": prompt_hashes(), "tree_settings": plan.settings,
        "rubric_source": cfg.build.rubric_source}, counts)
