"""Token and cost ledger per role and per stage, and the budget cap over all of them.

Thread-safe (one client may serve several event loops). ``calls`` counts ``generate`` calls, ``requests``
the answers fetched from a backend (re-prompts and replays included), ``cache_hits`` the calls answered
from the cache, ``failures`` the calls that ended with ``ok=False``, ``unpriced_requests`` the requests
whose model is missing from litellm's price table (counted at cost 0).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from rubricforge.errors import BudgetExceeded

FIELDS = ("calls", "requests", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits", "failures",
          "unpriced_requests")


def _empty() -> dict[str, float]:
    return {f: 0 for f in FIELDS} | {"cost_usd": 0.0}


class Ledger:
    def __init__(self, max_cost_usd: float | None = None, max_tokens: int | None = None):
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._by_role: dict[str, dict[str, float]] = defaultdict(_empty)
        self._by_stage: dict[str, dict[str, float]] = defaultdict(_empty)
        self._total = _empty()

    def _add(self, role: str, stage: str, **amounts: float) -> None:
        with self._lock:
            for bucket in (self._by_role[role], self._by_stage[stage], self._total):
                for name, amount in amounts.items():
                    bucket[name] += amount

    def call(self, role: str, stage: str, *, cached: bool, failed: bool) -> None:
        """One finished ``generate`` call."""
        self._add(role, stage, calls=1, cache_hits=int(cached), failures=int(failed))

    def request(self, role: str, stage: str, prompt_tokens: int, completion_tokens: int, cost_usd: float,
                cost_known: bool = True) -> None:
        """One answer fetched from a backend (not from the cache)."""
        self._add(role, stage, requests=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                  cost_usd=cost_usd, unpriced_requests=int(not cost_known))

    def check_budget(self) -> None:
        """Raise :class:`BudgetExceeded` once the cost or token cap is reached."""
        with self._lock:
            cost, tokens = self._total["cost_usd"], self._total["prompt_tokens"] + self._total["completion_tokens"]
        if self.max_cost_usd is not None and cost >= self.max_cost_usd:
            spent, cap, knob = f"${cost:.4f}", f"${self.max_cost_usd:.4f}", "llm.max_cost_usd"
        elif self.max_tokens is not None and tokens >= self.max_tokens:
            spent, cap, knob = f"{int(tokens)} tokens", f"{self.max_tokens} tokens", "llm.max_tokens"
        else:
            return
        raise BudgetExceeded(f"LLM budget reached: spent {spent} of the {cap} cap ({knob})",
                             f"raise it, e.g. --set {knob}=<more>, and re-run the same command: finished work is "
                             "kept and the run resumes")

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"by_role": {k: dict(v) for k, v in self._by_role.items()},
                    "by_stage": {k: dict(v) for k, v in self._by_stage.items()},
                    "total": dict(self._total)}
