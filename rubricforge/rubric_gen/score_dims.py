"""SCORE's evaluator side, generator half: the dimension pool and its scheduler, the meta-harness, and the
evaluator's rubric selection (SCORE §3.3–3.4, Alg. 1 l.3, 8, 12–13, 33–40, App. H Listings 3–4; docs/methods.md S-1–S-3).

* :data:`DIMENSIONS` — the pool 𝒟 (the paper never lists it; assembled from §3.1 and the Fig. 6 case study),
  each with the one-line definition the evaluator sees.
* :class:`DimensionScheduler` — per dimension d: n_d (steps it was selected), C̄_d (mean batch consistency
  R_eval over those steps), r̄_d (mean solver reward over them); ``constraints()`` is Alg. 1's GetConstraints.
* :class:`Harness` — ℳ_t (Listing 3's keys verbatim), refreshed every M = 5 steps by a fixed external LLM;
  an invalid or failed answer keeps ℳ_{t−1}.
* :func:`selection_messages` / :func:`parse_selection` — the rubric-selection action (H_q, w_q) ~ π_e(·|q, ℰ_q):
  must_include dimensions plus exactly k − |must_include| pool dimensions, weights in [weight_min, weight_max].
"""

from __future__ import annotations

import json
import logging
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from rubricforge.llm.judge import Judge
from rubricforge.rubric_gen.prompting import PROMPTS

if TYPE_CHECKING:
    from rubricforge.llm import LLMClient

log = logging.getLogger(__name__)

DIMENSIONS: dict[str, str] = {
    "factuality": "claims are correct and supported by the evidence",
    "evidence_coverage": "covers the key facts, sources and facets the query needs (completeness)",
    "citation_grounding": "citations exist, point to the right sources and support the claims they follow",
    "contradiction_handling": "notices conflicting evidence and reconciles or reports it",
    "uncertainty_calibration": "states confidence that matches the evidence; flags what is unknown",
    "coherence": "the argument flows logically from section to section",
    "insight": "analysis beyond listing facts: mechanisms, second-order effects, implications",
    "complexity": "handles the technical depth and nuance the query calls for",
    "diversity": "represents the relevant perspectives and stakeholders",
    "fairness": "balanced and free of unjustified bias",
    "instruction_following": "answers exactly what was asked, within the query's scope and constraints",
    "readability": "clear structure, precise language, well-presented data",
}
HARNESS_EVERY = 5  # M of Alg. 1 (App. G Table 2)


# ---------------------------------------------------------------- S-1 scheduler

@dataclass
class DimStats:
    n: int = 0
    consistency: float = 0.0  # C̄_d
    reward: float = 0.0  # r̄_d


@dataclass
class DimensionScheduler:
    """SCORE Alg. 1 l.3, 8, 34. Hints: dimensions selected fewer than 3 times; avoided: among those selected at
    least 5 times, the ones whose C̄_d is in the bottom 20 % (the paper names the outputs only; rule of docs/methods.md S-1)."""

    pool: dict[str, str] = field(default_factory=lambda: dict(DIMENSIONS))
    stats: dict[str, DimStats] = field(default_factory=dict)

    def update(self, dims: Iterable[str], r_eval: float, solver_reward: float | None = None) -> None:
        """UpdateStats(H_t, {C_i}): each dimension selected this step gets one more sample of R_eval (and of the
        step's mean solver reward)."""
        for d in dict.fromkeys(dims):
            s = self.stats.setdefault(d, DimStats())
            s.n += 1
            s.consistency += (r_eval - s.consistency) / s.n
            if solver_reward is not None:
                s.reward += (solver_reward - s.reward) / s.n

    def constraints(self, required: Sequence[str]) -> dict[str, list[str]]:
        """GetConstraints() → required / avoided dimensions and exploration hints."""
        n = {d: self.stats.get(d, DimStats()).n for d in self.pool}
        hints = [d for d in self.pool if n[d] < 3 and d not in required]
        seasoned = sorted((self.stats[d].consistency, d) for d in self.pool if n[d] >= 5 and d not in required)
        avoided = [d for _, d in seasoned[:int(len(seasoned) * 0.2)]]
        return {"required": list(required), "avoided": avoided, "hints": hints}

    def summary(self) -> dict[str, dict[str, float]]:
        return {d: {"n": s.n, "consistency": round(s.consistency, 6), "reward": round(s.reward, 6)}
                for d, s in sorted(self.stats.items())}

    def state_dict(self) -> dict[str, Any]:
        return {"pool": dict(self.pool), "stats": {d: vars(s).copy() for d, s in self.stats.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.pool = dict(state["pool"])
        self.stats = {d: DimStats(**s) for d, s in state["stats"].items()}


# ---------------------------------------------------------------- S-2 meta-harness

class DimensionConstraints(BaseModel):
    k: int = Field(4, ge=1)
    must_include: list[str] = Field(default_factory=lambda: ["factuality"])
    weight_min: float = Field(0.1, gt=0, le=1)
    weight_max: float = Field(0.5, gt=0, le=1)

    @model_validator(mode="after")
    def _range(self) -> DimensionConstraints:
        if self.weight_min > self.weight_max:
            raise ValueError(f"weight_min {self.weight_min} > weight_max {self.weight_max}")
        return self


class ProcessConstraints(BaseModel):
    require_gap_analysis: bool = True
    require_verification: bool = True
    citation_cross_check: bool = True
    min_number_of_tool_call: int = Field(1, ge=0)  # τ_s of Alg. 1 l.23 (our reading, docs/methods.md S-2)


class PoolEntry(BaseModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{1,40}$")
    definition: str = Field(min_length=3, max_length=200)


class Harness(BaseModel):
    """ℳ_t, Listing 3's output; ``dimension_pool`` (optional) replaces the pool (§3.3: the harness may edit it)."""

    dimension_constraints: DimensionConstraints = Field(default_factory=DimensionConstraints)
    process_constraints: ProcessConstraints = Field(default_factory=ProcessConstraints)
    notes: str = ""
    dimension_pool: list[PoolEntry] | None = None

    def checked(self, pool: Mapping[str, str]) -> tuple[Harness, dict[str, str]]:
        """The harness against ``pool`` (or its own pool): unknown ``must_include`` names dropped, 1 ≤ k ≤ |pool|,
        k ≥ |must_include|. Returns (harness, pool); raises ValueError when no valid harness remains."""
        if self.dimension_pool is not None:
            pool = {p.name: p.definition for p in self.dimension_pool}
            if len(pool) < 2:
                raise ValueError("dimension_pool needs at least 2 distinct dimensions")
        dc = self.dimension_constraints
        must = [d for d in dict.fromkeys(dc.must_include) if d in pool]
        if dropped := [d for d in dc.must_include if d not in pool]:
            log.warning("harness: unknown must_include dimensions dropped: %s", ", ".join(dropped))
        if not must:
            raise ValueError("no known dimension left in must_include")
        if not len(must) <= dc.k <= len(pool):
            raise ValueError(f"k = {dc.k} must lie in [{len(must)}, {len(pool)}]")
        fixed = self.model_copy(update={"dimension_constraints": dc.model_copy(update={"must_include": must}),
                                        "dimension_pool": None})
        return fixed, dict(pool)


def harness_due(step: int, every: int = HARNESS_EVERY) -> bool:
    """Alg. 1 l.35: ℳ_t is regenerated when t mod M = 0."""
    return step % every == 0


async def refresh_harness(client: LLMClient, role: str, statistics_json: Mapping[str, Any], current: Harness,
                          pool: Mapping[str, str]) -> tuple[Harness, dict[str, str], str | None]:
    """Harness.Generate(𝒯_t, ℳ_{t−1}, ℳ_default) by the fixed external LLM ``role`` (Listing 3). Returns
    (ℳ_t, pool, None), or (ℳ_{t−1}, pool, why) when the answer failed or was invalid (logged)."""
    judge = Judge(client, role, prompts=PROMPTS)
    got = await judge.ask("score_harness", HarnessAnswer, stage="score_harness",
                          statistics=json.dumps(statistics_json, indent=1, sort_keys=True))
    if got is None:
        return current, dict(pool), "harness call failed"
    try:
        harness, new_pool = got.harness.checked(pool)
    except ValueError as exc:
        log.warning("harness answer rejected, the previous harness stays: %s", exc)
        return current, dict(pool), str(exc)
    return harness, new_pool, None


class HarnessAnswer(BaseModel):
    """The meta-harness answer, read leniently: a value Harness rejects (e.g. weight_min > weight_max) is not
    re-prompted but keeps ℳ_{t−1} (docs/methods.md S-2)."""

    dimension_constraints: dict[str, Any]
    process_constraints: dict[str, Any] = Field(default_factory=dict)
    notes: str = ""
    dimension_pool: list[dict[str, Any]] | None = None

    @property
    def harness(self) -> Harness:
        try:
            return Harness.model_validate(self.model_dump())
        except ValidationError as exc:
            raise ValueError(f"invalid harness: {exc.errors()[0]['msg']}") from None


# ---------------------------------------------------------------- S-3 rubric selection

@dataclass(frozen=True)
class Selection:
    """(H_q, w_q): dimension -> weight; the must_include dimensions weigh 1.0 (docs/methods.md S-3, our choice)."""

    weights: dict[str, float]
    primary: tuple[str, ...]

    def describe(self) -> str:
        """The line appended to the solver's request (Alg. 1 l.16; wording is ours, docs/methods.md S-6)."""
        parts = [f"{d} (primary)" if d in self.primary else f"{d} ({w:g})" for d, w in self.weights.items()]
        return "Your report will be evaluated on: " + ", ".join(parts) + "."

    def as_json(self) -> dict[str, Any]:
        return {"weights": dict(self.weights), "primary": list(self.primary)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Selection:
        return cls(dict(data["weights"]), tuple(data["primary"]))


def default_selection(harness: Harness) -> Selection:
    """The rubric a solver gets when the evaluator's selection was invalid: must_include at weight 1.0."""
    must = harness.dimension_constraints.must_include
    return Selection(dict.fromkeys(must, 1.0), tuple(must))


def selection_messages(query: str, harness: Harness, pool: Mapping[str, str],
                       constraints: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """x^rubric: the query, the harness constraints, the pool, the scheduler's hints and avoided dimensions."""
    dc = harness.dimension_constraints
    listing = "\n".join(f"- {d}: {text}" for d, text in pool.items())
    return PROMPTS.messages("score_select", query=query, pool=listing, must_include=", ".join(dc.must_include),
                            n_extra=dc.k - len(dc.must_include), weight_min=f"{dc.weight_min:g}",
                            weight_max=f"{dc.weight_max:g}", hints=", ".join(constraints.get("hints", [])) or "none",
                            avoided=", ".join(constraints.get("avoided", [])) or "none",
                            notes=harness.notes or "none")


_DIMS = re.compile(r"<dimensions>(.*?)</dimensions>", re.S)
_DIM = re.compile(r"<dim\s+([^>]*?)/?>")
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def parse_selection(text: str, harness: Harness, pool: Mapping[str, str]) -> tuple[Selection | None, str]:
    """The evaluator's ``<dimensions>`` block → (Selection, "") or (None, why): every must_include dimension,
    exactly k − |must_include| further distinct pool dimensions, each weight in [weight_min, weight_max]."""
    dc = harness.dimension_constraints
    block = _DIMS.search(text)
    if block is None:
        return None, "no <dimensions> block"
    extra: dict[str, float] = {}
    for m in _DIM.finditer(block.group(1)):
        attrs = dict(_ATTR.findall(m.group(1)))
        name = attrs.get("name", "").strip()
        if name not in pool:
            return None, f"unknown dimension '{name}'"
        if name in dc.must_include:
            continue
        if name in extra:
            return None, f"dimension '{name}' twice"
        try:
            weight = float(attrs.get("weight", ""))
        except ValueError:
            return None, f"dimension '{name}' has no numeric weight"
        if not dc.weight_min <= weight <= dc.weight_max:
            return None, f"weight {weight:g} of '{name}' outside [{dc.weight_min:g}, {dc.weight_max:g}]"
        extra[name] = weight
    want = dc.k - len(dc.must_include)
    if len(extra) != want:
        return None, f"{len(extra)} additional dimensions, expected exactly {want}"
    return Selection({**dict.fromkeys(dc.must_include, 1.0), **extra}, tuple(dc.must_include)), ""


def harness_statistics(scheduler: DimensionScheduler, recent: Sequence[Mapping[str, Any]], harness: Harness,
                       baseline: float) -> dict[str, Any]:
    """𝒯_t (the paper leaves it open; docs/methods.md S-2): per-dimension n_d, C̄_d, r̄_d; over the last M steps the solver
    reward mean/std, the share of rewards the verifier zeroed, mean evaluator search calls, R_eval; b_t; ℳ_{t−1}."""

    def mean(key: str) -> float | None:
        values = [float(s[key]) for s in recent if s.get(key) is not None]
        return round(statistics.fmean(values), 6) if values else None

    return {"dimensions": scheduler.summary(), "solver_reward_mean": mean("reward_mean"),
            "solver_reward_std": mean("reward_std"), "verifier_zeroed_share": mean("verifier_zeroed"),
            "evaluator_search_calls_mean": mean("search_calls"), "invalid_selection_share": mean("invalid_share"),
            "r_eval_mean": mean("r_eval"), "baseline": round(baseline, 6),
            "harness": harness.model_dump(exclude={"dimension_pool"})}
