"""How well a scorer agrees with known preferences (Prefs §4.1, App. E; docs/methods.md Q-7).

Over pairs i with Δ_i = S(r_acc^i) − S(r_rej^i):

* preference accuracy (Eq. 6) = (1/N) Σ 𝕀[Δ_i > 0] — strict: a tie counts as wrong (the paper calls it AUC,
  which would count a tie ½; ties are reported separately);
* paired Cohen's d (Eq. 7) = mean(Δ) / sd(Δ) with the sample sd (ddof = 1; the paper's "Var" is unspecified);
  undefined (None) for fewer than two pairs or sd = 0 up to floating-point noise (sd ≤ 1e-9 · max |Δ|: equal
  gaps 0.2, 0.2, 0.2 computed as score differences have a rounding sd of order 1e-17, which made d of order 1e15);
* a percentile bootstrap confidence interval for both (pairs resampled with replacement, seeded).

Pairs with an unscored side are left out of N and counted as unscored.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SPREAD_TOLERANCE = 1e-9  # relative to the largest |Δ|: a smaller sd is rounding noise of equal gaps


def preference_accuracy(deltas: Sequence[float]) -> float | None:
    """Eq. 6: the share of pairs whose chosen report scores strictly higher."""
    return sum(d > 0 for d in deltas) / len(deltas) if deltas else None


def paired_cohens_d(deltas: Sequence[float], ddof: int = 1) -> float | None:
    """Eq. 7: mean(Δ) / sd(Δ), sample sd by default; None when the gaps do not spread (beyond rounding)."""
    if len(deltas) <= ddof:
        return None
    mean = statistics.fmean(deltas)
    sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / (len(deltas) - ddof))
    return mean / sd if sd > SPREAD_TOLERANCE * max(abs(d) for d in deltas) else None


def bootstrap_stat_ci(deltas: Sequence[float], stat: Callable[[Sequence[float]], float | None], n_boot: int = 1000,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``stat`` (resamples where it is undefined are skipped)."""
    if len(deltas) < 2:
        return None
    rng = random.Random(seed)
    values = sorted(v for v in (stat(rng.choices(deltas, k=len(deltas))) for _ in range(n_boot)) if v is not None)
    if not values:
        return None
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    return values[int(lo * (len(values) - 1))], values[math.ceil(hi * (len(values) - 1))]


@dataclass
class PreferenceMetrics:
    n: int  # pairs scored on both sides
    unscored: int
    ties: int
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    cohens_d: float | None
    cohens_d_ci: tuple[float, float] | None
    mean_delta: float | None


def preference_metrics(scores: Sequence[tuple[float | None, float | None]], n_boot: int = 1000, seed: int = 0
                       ) -> PreferenceMetrics:
    """Metrics over ``(S(r_acc), S(r_rej))`` pairs."""
    deltas = [c - r for c, r in scores if c is not None and r is not None]
    return PreferenceMetrics(
        n=len(deltas), unscored=len(scores) - len(deltas), ties=sum(d == 0 for d in deltas),
        accuracy=preference_accuracy(deltas), accuracy_ci=bootstrap_stat_ci(deltas, preference_accuracy, n_boot, seed=seed),
        cohens_d=paired_cohens_d(deltas), cohens_d_ci=bootstrap_stat_ci(deltas, paired_cohens_d, n_boot, seed=seed),
        mean_delta=statistics.fmean(deltas) if deltas else None)
