"""Query-specific rubrics in Prefs' ``{title, description, weight}`` form (§3.3, App. C.1, App. I; docs/methods.md Q-2).

:func:`parse_rubric_items` reads a generator's answer: a JSON array (a ```json fence or prose around it
is tolerated) of objects with exactly ``title``, ``description`` and ``weight``, numeric weights, at
least one positive — the hard checks of the format reward (:func:`pref_format_reward`: −1 if one fails,
else 0). The soft checks (7–20 items, a category prefix, the weight in its category's range, a 2–6 word
title) are returned as warnings, not penalised. :func:`generate_rubrics` asks the generator role with
prompt C.1 and re-prompts an unreadable answer with the reason. Items become
:class:`~rubricforge.schema.Criterion` records (``type`` "logical", ids ``R1``…), the one rubric record
every scorer reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from rubricforge.llm.structured import TextAnswer
from rubricforge.rubric_gen.prompting import PROMPTS
from rubricforge.schema import Criterion

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

KEYS = {"title", "description", "weight"}
PREFIXES = {"key": (5, 5), "important": (3, 4), "optional": (1, 2), "error": (-2, -1)}  # weight range per category


class PrefRubricItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    description: str
    weight: float


def _first_json_value(text: str) -> Any:
    """The first JSON value opening with ``[`` or ``{`` in a ```json fence, else in the text."""
    fences = [part.split("\n", 1)[-1] for part in text.split("```")[1::2]]
    decoder = json.JSONDecoder()
    for chunk in [*fences, text]:
        starts = sorted(i for i in (chunk.find("["), chunk.find("{")) if i != -1)
        for start in starts[:1]:
            try:
                return decoder.raw_decode(chunk, start)[0]
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON array found in the answer")


def parse_rubric_items(text: str) -> tuple[list[PrefRubricItem], list[str]]:
    """The items of a C.1 answer and the soft-check warnings; ``ValueError`` names the failed hard check."""
    data = _first_json_value(text)
    if not isinstance(data, list):
        raise ValueError("the answer must be a JSON array of rubric items, not a JSON " + type(data).__name__)
    if not data:
        raise ValueError("the JSON array is empty")
    items = []
    for n, raw in enumerate(data):
        if not isinstance(raw, dict) or set(raw) != KEYS:
            keys = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
            raise ValueError(f"item {n} must have exactly the keys title, description, weight (has {keys})")
        if not isinstance(raw["weight"], (int, float)) or isinstance(raw["weight"], bool):
            raise ValueError(f"item {n}: weight must be a number")
        if not isinstance(raw["title"], str) or not isinstance(raw["description"], str) or not raw["description"].strip():
            raise ValueError(f"item {n}: title and description must be strings, the description non-empty")
        items.append(PrefRubricItem(**raw))
    if not any(item.weight > 0 for item in items):
        raise ValueError("at least one item needs a positive weight")
    return items, soft_warnings(items)


def soft_warnings(items: list[PrefRubricItem]) -> list[str]:
    """C.1's recommendations that are logged, not penalised."""
    out = [] if 7 <= len(items) <= 20 else [f"{len(items)} items (C.1 asks for 7-20)"]
    for n, item in enumerate(items):
        category = item.description.split(":", 1)[0].strip().lower().removesuffix(" criterion")
        if category not in PREFIXES or ":" not in item.description:
            out.append(f"item {n}: no 'Key/Important/Optional/Error Criterion:' prefix")
        elif not PREFIXES[category][0] <= item.weight <= PREFIXES[category][1]:
            out.append(f"item {n}: weight {item.weight:g} outside the {category} range {PREFIXES[category]}")
        if not 2 <= len(item.title.split()) <= 6:
            out.append(f"item {n}: title of {len(item.title.split())} words (C.1 asks for 2-6)")
    return out


def pref_format_reward(text: str) -> int:
    """R_fmt (Prefs §3.3): −1 if a hard check of :func:`parse_rubric_items` fails, else 0."""
    try:
        parse_rubric_items(text)
    except ValueError:
        return -1
    return 0


def pref_criteria(items: list[PrefRubricItem] | list[dict[str, Any]]) -> list[Criterion]:
    """Rubric items as criteria (``type`` "logical", ids R1, R2, …)."""
    return [Criterion(id=f"R{n}", type="logical", title=i.title.strip(), description=i.description.strip(),
                      weight=i.weight)
            for n, i in enumerate((PrefRubricItem.model_validate(x) for x in items), start=1)]


class RubricItems(TextAnswer):
    """A generator's C.1 answer, read by :func:`parse_rubric_items` (unreadable answers are re-prompted)."""

    FORMAT = 'a JSON array [{"title": ..., "description": "Key Criterion: ...", "weight": 5}, ...]'
    items: list[PrefRubricItem]
    warnings: list[str] = []

    @classmethod
    def from_text(cls, text: str) -> RubricItems:
        items, warnings = parse_rubric_items(text)
        return cls(items=items, warnings=warnings)


def generation_messages(query: str) -> list[dict[str, str]]:
    """Prompt C.1 for ``query`` (system: the instructions; user: ``query: ...``)."""
    return [{"role": "system", "content": PROMPTS.render("pref_rubrics.system")},
            {"role": "user", "content": PROMPTS.render("pref_rubrics.user", query=query)}]


async def generate_rubrics(client: LLMClient, query: str, role: str = "generator") -> list[Criterion] | None:
    """Zero-shot (or trained-generator) rubrics for ``query`` from ``role``'s model; None when unreadable."""
    res = await client.generate(role, generation_messages(query), output=RubricItems, stage="pref_rubrics")
    return pref_criteria(res.value.items) if res.ok else None
