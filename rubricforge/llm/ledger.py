"""Token and cost ledger per role and per stage, and the budget cap over all of them.

The cap is a ceiling: a request is sent only after :meth:`Ledger.reserve` booked its bound (its prompt estimate
plus its ``max_tokens``, and their price), and none is sent while what is spent plus what the requests in flight
reserved reaches the cap; :meth:`Ledger.release` drops the reservation once the request is answered (and booked)
or failed. So a job spends at most the cap plus what the requests in flight when it was reached spend.

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
        self._reserved = {"tokens": 0.0, "cost_usd": 0.0, "requests": 0.0}

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
            self._raise_if_spent()

    def reserve(self, tokens: float, cost_usd: float) -> bool:
        """Book a request's bound before it is sent: True when booked; False when it must wait (the spend plus
        the reservations of the requests in flight reach the cap); :class:`BudgetExceeded` once the spend
        alone reaches it. A request is always booked when none is in flight and the cap is not reached."""
        with self._lock:
            self._raise_if_spent()
            r = self._reserved
            if r["requests"] and ((self.max_tokens is not None and self._tokens() + r["tokens"] >= self.max_tokens)
                                  or (self.max_cost_usd is not None
                                      and self._total["cost_usd"] + r["cost_usd"] >= self.max_cost_usd)):
                return False
            r["tokens"] += tokens
            r["cost_usd"] += cost_usd
            r["requests"] += 1
            return True

    def release(self, tokens: float, cost_usd: float) -> None:
        """Drop a reservation of :meth:`reserve` (after the answer was booked with :meth:`request`, or failed)."""
        with self._lock:
            self._reserved["tokens"] -= tokens
            self._reserved["cost_usd"] -= cost_usd
            self._reserved["requests"] -= 1

    @property
    def capped(self) -> bool:
        return self.max_tokens is not None or self.max_cost_usd is not None

    def _tokens(self) -> float:
        return self._total["prompt_tokens"] + self._total["completion_tokens"]

    def _raise_if_spent(self) -> None:
        """(lock held)"""
        cost, tokens = self._total["cost_usd"], self._tokens()
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
