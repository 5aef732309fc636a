"""Statistics a reviewer accepts: percentile-bootstrap confidence intervals of a mean, and paired comparisons
of two runs over the tasks both scored (mean difference with its bootstrap CI, win / tie / loss, exact
two-sided sign test).

The bootstrap draws ``resamples`` samples of the n values with replacement from numpy's
``default_rng(seed)`` (index matrix ``rng.integers(0, n, (resamples, n))``, drawn in one call, so a seed gives
one answer) and takes the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled means
(numpy's default linear interpolation). Unscored values (None) are left out and counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
TIE = 1e-9  # a paired difference this small is a tie


def bootstrap_ci(values: Sequence[float], resamples: int = RESAMPLES, seed: int = 0,
                 level: float = LEVEL) -> tuple[float, float] | None:
    """The percentile-bootstrap CI of the mean of ``values`` (None when there are none)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None
    idx = np.random.default_rng(seed).integers(0, x.size, (resamples, x.size))
    means = x[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def describe(values: Iterable[float | None], resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """n, unscored, mean, std (sample), min, max and the bootstrap CI of the scored values."""
    all_values = list(values)
    x = [float(v) for v in all_values if v is not None]
    ci = bootstrap_ci(x, resamples, seed)
    return {"n": len(x), "unscored": len(all_values) - len(x), "mean": float(np.mean(x)) if x else None,
            "std": float(np.std(x, ddof=1)) if len(x) > 1 else None, "min": min(x, default=None),
            "max": max(x, default=None), "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None}


def summarise(per_task: Mapping[str, Mapping[str, float | None]], resamples: int = RESAMPLES,
              seed: int = 0) -> dict[str, dict[str, Any]]:
    """:func:`describe` per metric over ``{task: {metric: value}}`` (metrics in order of first appearance)."""
    names = list(dict.fromkeys(m for metrics in per_task.values() for m in metrics))
    return {m: describe((metrics.get(m) for metrics in per_task.values() if m in metrics), resamples, seed)
            for m in names}


def pooled(numerators: Sequence[float], denominators: Sequence[float], resamples: int = RESAMPLES, seed: int = 0,
           level: float = LEVEL) -> dict[str, Any]:
    """Σ numerators / Σ denominators over n units (tasks), with the percentile-bootstrap CI of that ratio from
    resampling the units (a resample whose denominators sum to 0 is left out); the mean is None when the
    denominators sum to 0."""
    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    total = float(den.sum())
    out: dict[str, Any] = {"n": int(num.size), "numerator": float(num.sum()), "denominator": total,
                           "mean": float(num.sum()) / total if total > 0 else None, "ci_low": None, "ci_high": None}
    if num.size and total > 0:
        idx = np.random.default_rng(seed).integers(0, num.size, (resamples, num.size))
        sums = den[idx].sum(axis=1)
        ratios = num[idx].sum(axis=1)[sums > 0] / sums[sums > 0]
        out["ci_low"], out["ci_high"] = (float(q) for q in np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2]))
    return out


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign-test p-value of ``wins`` against ``losses`` (ties left out): 1.0 with none."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired(a: Mapping[str, float | None], b: Mapping[str, float | None], resamples: int = RESAMPLES,
           seed: int = 0) -> dict[str, Any]:
    """B against A over the tasks both scored: the mean difference (B − A) with its bootstrap CI, the means of
    both on those tasks, win / tie / loss counts (B higher / equal / lower) and the sign test's p-value."""
    shared = [t for t in a if t in b and a[t] is not None and b[t] is not None]
    diffs = [float(b[t]) - float(a[t]) for t in shared]  # type: ignore[arg-type]
    wins, losses = sum(d > TIE for d in diffs), sum(d < -TIE for d in diffs)
    ci = bootstrap_ci(diffs, resamples, seed)
    return {"n": len(shared), "mean_a": float(np.mean([a[t] for t in shared])) if shared else None,
            "mean_b": float(np.mean([b[t] for t in shared])) if shared else None,
            "diff": float(np.mean(diffs)) if diffs else None, "ci_low": ci[0] if ci else None,
            "ci_high": ci[1] if ci else None, "wins": wins, "ties": len(diffs) - wins - losses, "losses": losses,
            "sign_p": sign_test(wins, losses), "diffs": dict(zip(shared, diffs, strict=True))}


def balanced_accuracy(labels: Sequence[bool], predictions: Sequence[bool]) -> float | None:
    """The mean over the classes present in ``labels`` of the share of that class predicted as it (the recall of
    "yes" and of "no"; one class only: its recall); None with no pairs."""
    recalls = []
    for cls in (True, False):
        hits = [p == cls for y, p in zip(labels, predictions, strict=True) if y == cls]
        if hits:
            recalls.append(sum(hits) / len(hits))
    return sum(recalls) / len(recalls) if recalls else None
