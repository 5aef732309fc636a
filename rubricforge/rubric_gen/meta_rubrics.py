"""HOTE's meta rubrics (§2.2 Eq. 4) and diverse proposing (§2.3): what the proposer sees.

* :func:`combinations` — N pairwise-distinct k-subsets of a step's tasks (diverse proposing, Table 7).
* :func:`weaknesses` — the compression (docs/methods.md H-3) of a task's assessment A (G × |R| judgments): per rubric the
  pass rate p_R = mean_i J; only rubrics with p_R ≤ 0.5 are kept, weakest first, with one failing response's
  excerpt (≤ 150 words).
* :func:`meta_rubrics` — the fixed judge summarises one combination's weaknesses into M general rubrics
  (3 ≤ M ≤ 5, weights > 0; an answer with more is cut to 5). They are the proposer's input for that
  combination and the persistent rubrics of every task it proposes (one meta-rubric set per combination,
  the reading of Eq. 4 in docs/methods.md H-3, which Eq. 5 needs).
* :func:`proposer_messages` — the proposer's prompt for one combination and mode.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from rubricforge.errors import UserError
from rubricforge.llm.structured import Str80, Str400
from rubricforge.rubric_gen.bank import RubricItem, TaskRubrics, truncate_words
from rubricforge.rubric_gen.prompting import PROMPTS

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

log = logging.getLogger(__name__)
MAX_META = 5
EXCERPT_WORDS = 150
PASS_LIMIT = 0.5


def combinations(task_ids: Sequence[str], n: int, k: int, seed: str) -> list[tuple[str, ...]]:
    """``n`` pairwise-distinct ``k``-subsets of ``task_ids`` (as sets), drawn with ``random.Random(seed)``."""
    ids = sorted(dict.fromkeys(task_ids))
    k = min(k, len(ids))
    if n > comb(len(ids), k):
        raise UserError(f"diverse proposing needs {n} distinct combinations of {k} tasks, but {len(ids)} tasks "
                        f"give only {comb(len(ids), k)}", "lower hote.combo_size or raise hote.batch_size")
    rng = random.Random(seed)
    if comb(len(ids), k) <= 4 * n:  # few possibilities: draw from the full list
        return [tuple(c) for c in rng.sample(list(itertools.combinations(ids, k)), n)]
    seen: dict[frozenset[str], tuple[str, ...]] = {}
    while len(seen) < n:
        pick = tuple(sorted(rng.sample(ids, k)))
        seen.setdefault(frozenset(pick), pick)
    return list(seen.values())


@dataclass(frozen=True)
class Weakness:
    rubric: RubricItem
    pass_rate: float
    failing_excerpt: str


def weaknesses(tr: TaskRubrics, judgments: Mapping[str, Sequence[int | None]], responses: Sequence[str]) -> list[Weakness]:
    """The task's rubrics with pass rate ≤ 0.5 over the scored judgments, ascending (ties: rubric order). For a
    negative rubric "passing" means not showing the flaw (J = 0)."""
    out = []
    for item in tr.scored():
        values = [(i, v) for i, v in enumerate(judgments.get(item.id, ())) if v is not None]
        if not values:
            continue
        passed = [(v == 1) if item.weight > 0 else (v == 0) for _, v in values]
        rate = sum(passed) / len(passed)
        if rate <= PASS_LIMIT:
            failing = next(i for (i, _), ok in zip(values, passed, strict=True) if not ok)
            excerpt = truncate_words(responses[failing], EXCERPT_WORDS) if failing < len(responses) else ""
            out.append(Weakness(item, rate, excerpt))
    return sorted(out, key=lambda w: w.pass_rate)


def _task_block(query: str, found: Sequence[Weakness]) -> str:
    lines = [f"<task>\n<question>{query}</question>"]
    for w in found:
        lines.append(f"- [{'flaw' if w.rubric.weight < 0 else 'rubric'}] {w.rubric.title}: {w.rubric.description} "
                     f"(passed by {w.pass_rate:.0%} of responses)")
    if found:
        lines.append(f"<failing_response>{found[0].failing_excerpt}</failing_response>")
    return "\n".join(lines) + "\n</task>"


class _Meta(BaseModel):
    title: Str80
    description: Str400
    weight: float = Field(1.0, gt=0)


class MetaAnswer(BaseModel):
    rubrics: list[_Meta] = Field(min_length=3)


async def meta_rubrics(client: LLMClient, combo: Sequence[tuple[str, Sequence[Weakness]]], step: int, group: int,
                       role: str = "judge") -> list[RubricItem] | None:
    """HOTE Eq. 4 for one combination (``(query, weaknesses)`` per task): M ≤ 5 meta rubrics, or None when the
    judge call failed (the proposer, whose batch is all N combinations, then proposes nothing this step)."""
    tasks = "\n".join(_task_block(q, w) for q, w in combo)
    messages = PROMPTS.messages("hote_meta", tasks=tasks)
    got = await client.generate(role, messages, output=MetaAnswer, stage="hote_meta")
    if not got.ok:
        log.warning("meta rubrics for proposer group %d at step %d failed: %s", group, step, got.error)
        return None
    return [RubricItem(id=f"m{step}-{group}-{i}", title=m.title.strip(), description=m.description.strip(),
                       weight=m.weight, origin="meta", created_step=step)
            for i, m in enumerate(got.value.rubrics[:MAX_META], 1)]


def proposer_messages(queries: Sequence[str], meta: Sequence[RubricItem], tools: bool) -> list[dict[str, str]]:
    """The proposer's prompt for one combination: its tasks and meta rubrics; ``tools``: tool-use or no-tool mode."""
    mode = ("You may search with the tools before you write the task." if tools else
            "No tools are available: think once inside <think></think>, then write the task.")
    return PROMPTS.messages("hote_propose", tasks="\n".join(f"<task>{q}</task>" for q in queries),
                            weaknesses="\n".join(f"- {m.title}: {m.description}" for m in meta), mode=mode)
