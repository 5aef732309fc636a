"""`rubricforge train dpo-pairs`: preference pairs from self-sampled rollouts (MindDR §5.4).

Rollouts (``rubricforge rollouts sample``) are scored with ``train.pair_reward`` — by default ``alignment``, §5.4's
s(x, y): independent judges per dimension, tense accuracy and the rule-based hard penalties
(:mod:`~rubricforge.rewards.minddr.alignment`) — (through ``rubricforge reward score``'s resumable job, or read
from its output), then split per question into a high-quality set D+
(reward ≥ ``train.dpo_high``) and a low-quality set D− (reward ≤ ``train.dpo_low``); unscored rollouts
belong to neither. Each question gives up to ``train.dpo_pairs_per_prompt`` pairs: the best of D+ against
the worst of D−, then the next ones. The output is TRL's conversational preference layout — ``prompt``
(the agent prompt), ``chosen`` and ``rejected`` (the rollouts' assistant and tool messages) — plus ``id``,
``chosen_reward`` and ``rejected_reward``: ``out/`` (``datasets.save_to_disk``) and ``out/pairs.jsonl``. The
run's record goes to the run directory ``<out>.run/``: ``config.yaml`` and ``manifest.json`` (inputs, settings,
each invocation's status — the scoring's ``stopped: <why>`` after a budget stop —, counts, and the LLM ledger
of the scoring it ran).
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricforge.agent.rows import training_rows
from rubricforge.config import Config
from rubricforge.io.rejects import Rejects
from rubricforge.extras import needs
from rubricforge.jobs.base import JobResult, job_result, status_of
from rubricforge.jobs.reward_score import default_out, score_responses
from rubricforge.rewards.responses import load_responses
from rubricforge.io.files import atomic_write_json, atomic_write_text
from rubricforge.io.stagelog import StageLog
from rubricforge.rundir import RunDir, now


@dataclass
class PairsSummary:
    out: str
    prompts: int
    pairs: int
    scored: int
    unscored: int
    without_pair: int  # questions with an empty D+ or D-
    status: str = "complete"  # or the scoring's "stopped: <why>" (a budget stop: pairs of what is scored)

    def lines(self) -> list[str]:
        return [f"{self.pairs} pairs from {self.prompts} questions ({self.scored} scored rollouts, {self.unscored} "
                f"unscored, {self.without_pair} questions without a pair) -> {self.out}"]


def select_pairs(scored: list[tuple[float, Any]], high: float, low: float, k: int) -> list[tuple[tuple[float, Any], tuple[float, Any]]]:
    """Up to ``k`` (chosen, rejected): D+ from best down, paired with D- from worst up."""
    best = sorted((s for s in scored if s[0] >= high), key=lambda s: -s[0])
    worst = sorted((s for s in scored if s[0] <= low), key=lambda s: s[0])
    return list(zip(best, worst, strict=False))[:k]


def as_messages(completion: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": completion}] if isinstance(completion, str) else completion


def build_pairs(cfg: Config, dataset: str | Path, rollouts: str | Path, out: str | Path,
                scores: str | Path | None = None, progress: bool = False) -> JobResult:
    """The pairs of ``rollouts`` (scored now unless ``scores`` is given) in ``out``, the run's record in
    ``<out>.run/`` (the payload: :class:`PairsSummary`)."""
    with needs("train"):
        from datasets import Dataset, Features, Json, List, Value

    t, out = cfg.train, Path(out)
    run, invocation, started = RunDir(out.with_name(f"{out.name}.run"), "dpo-pairs"), uuid.uuid4().hex[:12], now()
    run.check_kind()
    run.write_config(cfg)
    fields = {"dataset": str(Path(dataset).resolve()), "rollouts": str(Path(rollouts).resolve()),
              "scores": str(Path(scores).resolve()) if scores else None, "out": str(out.resolve()),
              "settings": {"reward": t.pair_reward, "dpo_high": t.dpo_high, "dpo_low": t.dpo_low,
                           "dpo_pairs_per_prompt": t.dpo_pairs_per_prompt}}
    run.write_manifest(invocation, started, "running", fields)
    try:
        summary, rows = _pairs(cfg, dataset, rollouts, out, scores, progress, run.ledger_path(invocation, "scoring"))
        features = Features({"id": Value("string"), "prompt": List(Json()), "chosen": List(Json()),
                             "rejected": List(Json()), "chosen_reward": Value("float64"),
                             "rejected_reward": Value("float64")})
        # from columns: from_list cannot type an empty list (no pair, e.g. after a budget stop) with these features
        Dataset.from_dict({name: [r[name] for r in rows] for name in features}, features=features).save_to_disk(str(out))
        atomic_write_text(out / "pairs.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    except BaseException as exc:
        run.set_status(invocation, status_of(exc))
        raise
    run.write_manifest(invocation, started, summary.status, fields, {
        "prompts": summary.prompts, "pairs": summary.pairs, "scored": summary.scored, "unscored": summary.unscored,
        "without_pair": summary.without_pair})
    return job_result(summary, out, run)


def _pairs(cfg: Config, dataset: str | Path, rollouts: str | Path, out: Path, scores: str | Path | None,
           progress: bool, ledger: Path) -> tuple[PairsSummary, list[dict[str, Any]]]:
    """The summary and the pair rows; the ledger of the scoring run now goes to ``ledger``."""
    t = cfg.train
    examples = {str(r["id"]): r for r in training_rows(dataset, [t.pair_reward])}
    status = "complete"
    if scores is None:
        scores = default_out(rollouts)
        scored = score_responses(cfg, dataset, rollouts, [t.pair_reward], scores, progress=progress)
        status = scored.status
        atomic_write_json(ledger, {"ledger": RunDir(scored.run_dir, "reward-score").manifest()["invocations"][-1]["ledger"]})
    log: StageLog[Any] = StageLog(scores)
    rejects = Rejects()  # count only: `reward score` writes the rejects file
    by_id: dict[str, list[tuple[float, Any]]] = defaultdict(list)
    unscored = 0
    for response in load_responses(rollouts, examples, rejects):
        value = ((log.get(response.key) or {}).get("rewards", {}).get(t.pair_reward) or {}).get("value")
        if value is None:
            unscored += 1
        else:
            by_id[response.example_id].append((float(value), response.completion))
    rows = []
    for example_id, scored_rollouts in by_id.items():
        for (good, chosen), (bad, rejected) in select_pairs(scored_rollouts, t.dpo_high, t.dpo_low,
                                                            t.dpo_pairs_per_prompt):
            rows.append({"id": example_id, "prompt": examples[example_id]["prompt"], "chosen": as_messages(chosen),
                         "rejected": as_messages(rejected), "chosen_reward": good, "rejected_reward": bad})
    paired = {r["id"] for r in rows}
    return PairsSummary(str(out), len(by_id), len(rows), sum(map(len, by_id.values())), unscored,
                        len(set(by_id) - paired), status), rows
