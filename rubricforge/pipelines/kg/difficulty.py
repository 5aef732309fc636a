"""Difficulty labels (MindDR §4.5): from the hop count, the rarity of the subgraph's entities and the
filters' results.

The base level follows the hop bands of MindDR §4.4 (1–2 hops easy, 3 medium, 4–5 hard). Rarity is
the mean, over the subgraph's entities, of the share of graph nodes with a higher degree (1 = the
rarest); rare entities (mean ≥ 0.75) add a level, common ones (< 0.25) remove one. A single search
for the question that does not return the answer's passage adds a level. The result is clipped to
easy / medium / hard; every factor is kept with the label.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

LEVELS = ("easy", "medium", "hard")
RARE, COMMON = 0.75, 0.25


def hop_level(hops: int) -> int:
    return 0 if hops <= 2 else 1 if hops == 3 else 2


def rarity(degree: int, sorted_degrees: list[int]) -> float:
    """Share of nodes whose degree is higher than ``degree``."""
    n = len(sorted_degrees)
    return (n - bisect_right(sorted_degrees, degree)) / n if n else 0.0


def difficulty(hops: int, degrees: list[int], sorted_degrees: list[int],
               answer_passage_retrieved: bool | None) -> tuple[str, dict[str, Any]]:
    mean_rarity = sum(rarity(d, sorted_degrees) for d in degrees) / len(degrees) if degrees else 0.0
    level = hop_level(hops) + (mean_rarity >= RARE) - (mean_rarity < COMMON) + (answer_passage_retrieved is False)
    factors = {"hops": hops, "hop_level": LEVELS[hop_level(hops)], "entity_rarity": round(mean_rarity, 3),
               "answer_passage_retrieved": answer_passage_retrieved}
    return LEVELS[max(0, min(level, 2))], factors
