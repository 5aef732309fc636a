"""Evolving rubric banks (HOTE §2.2 Eq. 3; DR Tulu's evolving rubrics): per task, the dataset's
*persistent* rubrics plus *active* rubrics that a fixed judge proposes from the G responses of a step.

Per task and step (HOTE Alg. 1 l.11–13): :func:`update_active` asks the judge for positive rubrics
(strengths or new knowledge some responses show and no rubric reflects) and negative rubrics (shared flaws,
reward hacking); proposals that duplicate a rubric of the task are rejected (same normalised title or
description, or — given an embedder — cosine above ``dedup_cosine``); the responses are then scored with
persistent ∪ active (``rewards/hote/rubric_reward.py``, Eq. 2); :func:`prune` moves active rubrics whose judgments did not
vary over the group (they carry no advantage signal) and the lowest-variance ones beyond ``max_active`` to
*inactive*, kept for inspection and never scored. Persistent rubrics are never pruned. Constants are DR
Tulu's (``open_instruct/rubrics``): new rubrics weigh +1 / −1, at most 5 active, at most 5 new per update,
responses shown cut to 450 words.

A failed update call leaves the task's rubrics unchanged and is counted (``update_failed``); it never raises.
:class:`RubricBank` saves to one JSON file (atomic) and loads back to the identical state, so a resumed run
scores with the same rubrics.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import statistics
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from rubricforge.llm.structured import Str40, Str80, Str400
from rubricforge.rubric_gen.prompting import PROMPTS
from rubricforge.io.files import atomic_write_json
from rubricforge.schema import Criterion, Record

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

log = logging.getLogger(__name__)
Embedder = Callable[[list[str]], Any]  # texts -> unit-norm row vectors (numpy array)


class RubricItem(Record):
    """One rubric of a task's bank (docs/methods.md H-0). ``weight`` < 0 marks a negative rubric."""

    id: str
    title: str
    description: str
    weight: float
    origin: Literal["dataset", "meta", "evolved"] = "dataset"
    created_step: int = 0

    def criterion(self) -> Criterion:
        """The item as the rubric rewards read it (``{title, description, weight}``, no type)."""
        return Criterion(id=self.id, title=self.title, description=self.description or self.title, weight=self.weight)

    @classmethod
    def from_criterion(cls, c: Criterion) -> RubricItem:
        return cls(id=c.id, title=c.title, description=c.description, weight=c.weight)


class TaskRubrics(Record):
    task_id: str
    query: str
    persistent: list[RubricItem]
    active: list[RubricItem] = Field(default_factory=list)
    inactive: list[RubricItem] = Field(default_factory=list)

    def scored(self) -> list[RubricItem]:
        """R = persistent ∪ active (what Eq. 2 sums over)."""
        return [*self.persistent, *self.active]


@dataclass(frozen=True)
class BankSettings:
    pos_weight: float = 1.0
    neg_weight: float = 1.0
    max_active: int = 5
    max_new: int = 5
    answer_words: int = 450
    dedup_cosine: float = 0.9
    role: str = "judge"


@dataclass
class UpdateResult:
    positive: list[RubricItem] = field(default_factory=list)
    negative: list[RubricItem] = field(default_factory=list)
    duplicates: int = 0
    deleted: list[str] = field(default_factory=list)
    failed: bool = False


@dataclass
class PruneResult:
    zero_std: list[str] = field(default_factory=list)
    cap: list[str] = field(default_factory=list)


class _Proposed(BaseModel):
    title: Str80
    description: Str400 = ""


class RubricUpdate(BaseModel):
    """The judge's answer to the update prompt."""

    positive_rubrics: list[_Proposed] = Field(default_factory=list)
    negative_rubrics: list[_Proposed] = Field(default_factory=list)
    delete_ids: list[Str40] = Field(default_factory=list)


def normalise(text: str) -> str:
    """Case-folded, NFKC, punctuation dropped, whitespace collapsed ("Coverage " == "coverage")."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


def truncate_words(text: str, words: int) -> str:
    parts = text.split()
    return text if len(parts) <= words else " ".join(parts[:words]) + " …"


def is_duplicate(item: RubricItem, existing: Sequence[RubricItem], embed: Embedder | None = None,
                 threshold: float = 0.9) -> bool:
    """Its normalised title or description equal to an existing rubric's title or description — across the
    fields too, since a dataset criterion has only a description, which the judge restates as a new title —
    or (with ``embed``) a cosine above ``threshold`` between "title: description" texts (the evidence tree's
    redundancy test)."""
    mine = {normalise(item.title), normalise(item.description)} - {""}
    for other in existing:
        if mine & {normalise(other.title), normalise(other.description)}:
            return True
    if embed is None or not existing:
        return False
    vectors = embed([f"{x.title}: {x.description}" for x in (item, *existing)])
    return bool((vectors[1:] @ vectors[0]).max() > threshold)


def _listing(items: Sequence[RubricItem]) -> str:
    return "\n".join(f"[{i.id}] (weight {i.weight:+g}) {i.title}: {i.description}" for i in items) or "(none)"


async def update_active(client: LLMClient, tr: TaskRubrics, responses: Sequence[str], step: int,
                        settings: BankSettings = BankSettings(), embed: Embedder | None = None) -> UpdateResult:
    """HOTE Eq. 3: R_active ← Update(s0, {o_i}, R_active). Mutates ``tr`` only when the call succeeded."""
    shown = "\n".join(f"<response n={n}>\n{truncate_words(r, settings.answer_words)}\n</response>"
                      for n, r in enumerate(responses, 1))
    messages = [{"role": "system", "content": PROMPTS.render("evolve_update.system")},
                {"role": "user", "content": PROMPTS.render("evolve_update.user", question=tr.query, responses=shown,
                                                           existing=_listing(tr.scored()))}]
    got = await client.generate(settings.role, messages, output=RubricUpdate, stage="evolve_update")
    if not got.ok:
        log.warning("rubric update for task %s failed, its rubrics stay as they were: %s", tr.task_id, got.error)
        return UpdateResult(failed=True)
    answer: RubricUpdate = got.value
    out = UpdateResult()
    known = tr.scored()
    proposals = [(p, settings.pos_weight, "a") for p in answer.positive_rubrics] + \
                [(p, -settings.neg_weight, "n") for p in answer.negative_rubrics]
    for n, (p, weight, prefix) in enumerate(proposals, 1):
        if len(out.positive) + len(out.negative) >= settings.max_new:
            break
        item = RubricItem(id=f"{prefix}{step}-{n}", title=p.title.strip(), description=p.description.strip(),
                          weight=weight, origin="evolved", created_step=step)
        if not item.title or is_duplicate(item, known, embed, settings.dedup_cosine):
            out.duplicates += 1
            continue
        known.append(item)
        (out.positive if weight > 0 else out.negative).append(item)
    deleted = {i for i in answer.delete_ids} & {a.id for a in tr.active}
    tr.inactive += [a for a in tr.active if a.id in deleted]
    tr.active = [a for a in tr.active if a.id not in deleted] + out.positive + out.negative
    out.deleted = sorted(deleted)
    return out


def prune(tr: TaskRubrics, judgments: Mapping[str, Sequence[float | None]], max_active: int = 5) -> PruneResult:
    """Move active rubrics whose judgments over the group have zero population std to inactive, then keep the
    ``max_active`` with the largest std (ties: newest first). Rubrics with fewer than two scored judgments are
    left alone (no evidence either way); persistent rubrics are never pruned."""
    out = PruneResult()
    spread: dict[str, float] = {}
    for item in tr.active:
        scored = [v for v in judgments.get(item.id, ()) if v is not None]
        if len(scored) >= 2:
            spread[item.id] = statistics.pstdev(scored)
    out.zero_std = [a.id for a in tr.active if spread.get(a.id, 1.0) == 0]
    kept = [a for a in tr.active if a.id not in out.zero_std]
    if len(kept) > max_active:
        order = sorted(range(len(kept)), key=lambda i: (-spread.get(kept[i].id, float("inf")),
                                                        -kept[i].created_step, -i))
        keep = set(order[:max_active])
        out.cap = [kept[i].id for i in range(len(kept)) if i not in keep]
        kept = [kept[i] for i in sorted(keep)]
    removed = set(out.zero_std) | set(out.cap)
    tr.inactive += [a for a in tr.active if a.id in removed]
    tr.active = kept
    return out


class RubricBank:
    """Every task's :class:`TaskRubrics`, the step they were last updated at, and failed-update counts."""

    def __init__(self, settings: BankSettings = BankSettings()):
        self.settings = settings
        self.tasks: dict[str, TaskRubrics] = {}
        self.step = 0
        self.update_failed = 0

    def task(self, task_id: str, query: str, rubrics: Sequence[Criterion]) -> TaskRubrics:
        """The task's rubrics; on first sight its persistent rubrics are the dataset's (weights as given)."""
        if task_id not in self.tasks:
            self.tasks[task_id] = TaskRubrics(task_id=task_id, query=query,
                                              persistent=[RubricItem.from_criterion(c) for c in rubrics])
        return self.tasks[task_id]

    async def update(self, client: LLMClient, groups: Mapping[str, Sequence[str]], step: int,
                     embed: Embedder | None = None) -> dict[str, UpdateResult]:
        """Eq. 3 for every task of ``groups`` (task id -> its G responses, the tasks already known), concurrently."""
        ids = list(groups)
        got = await asyncio.gather(*(update_active(client, self.tasks[t], groups[t], step, self.settings, embed)
                                     for t in ids))
        self.update_failed += sum(r.failed for r in got)
        self.step = step
        return dict(zip(ids, got, strict=True))

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "update_failed": self.update_failed,
                "tasks": {k: v.model_dump(mode="json") for k, v in sorted(self.tasks.items())}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.step, self.update_failed = int(state["step"]), int(state["update_failed"])
        self.tasks = {k: TaskRubrics.model_validate(v) for k, v in state["tasks"].items()}

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.state_dict())

    def load(self, path: str | Path) -> None:
        self.load_state_dict(json.loads(Path(path).read_text(encoding="utf-8")))
