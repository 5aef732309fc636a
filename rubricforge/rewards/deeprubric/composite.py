"""The composite reward (DeepRubric Eq. 5): R = 0.5·R_rubric + 0.2·R_format + 0.2·R_cite + 0.1·R_search,
weights configurable (``reward.weights``). Each component lies in [0, 1], so R lies in [0, Σ w] (= [0, 1]
with the paper's weights; other weights are not renormalised). If any weighted component is unscored,
R is unscored (None): a missing judge verdict is never read as 0.

A no-tool rollout (HOTE's no-tool mode) has no citation or search term: the components it has are weighted
as given and scaled by Σ w / Σ w_kept, so its reward spans the same range as a tool rollout's.
"""

from __future__ import annotations

from collections.abc import Mapping

from rubricforge.config import RewardWeights

COMPONENTS = ("rubric", "format", "citation", "search")


def composite(components: Mapping[str, float | None], weights: RewardWeights) -> float | None:
    """Eq. 5 over the components given (all four, or the no-tool subset)."""
    total, kept = 0.0, 0.0
    for name in COMPONENTS:
        w = getattr(weights, name)
        if w == 0 or name not in components:
            continue
        value = components[name]
        if value is None:
            return None
        total, kept = total + w * value, kept + w
    everything = sum(getattr(weights, name) for name in COMPONENTS)
    return total * everything / kept if kept and kept != everything else total
