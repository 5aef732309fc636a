"""Search-RL rewards (MindDR §5.2, Eqs. 6–9) and the threshold-triggered coefficient scheduler.

Steps are :attr:`Trajectory.steps` (one per assistant turn). Per step t:

* tool success c_t (Eq. 6) is defined for steps that contain a ``<tool_call>`` tag: 1 when every call
  of the step is valid and at least one response came back and every response is ``ok`` (not a
  ``[tool error]``, not "No results found", not blank); a step without a tool call has no c_t and
  gets no tool reward. c_{t−1} is the previous step *with* a tool call; before the first one c_0 = 1,
  so a failing first call is an isolated failure (−0.1), not a consecutive one.
* format (Eq. 7) follows the App. D workflow: the step has no malformed or misplaced tag, no text
  outside blocks, and exactly one closed ``<think>`` followed by exactly one ``<tool_call>`` or —
  in the last step only — one ``<answer>``.

R = λ_ORM·R_ORM + λ_PRM·R_PRM + (1/T)·Σ_t [λ_tool·r_tool(t) + λ_format·r_format(t)] (Eq. 9), T the
number of steps. R_PRM, R_ORM ∈ [0, 1] and r ∈ [−0.2, 0.1], so R ∈ [−0.2, 1] — the paper's range,
not [0, 1]. A trajectory with no step has no step term.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rubricforge.rewards.trajectory import Step, Trajectory

log = logging.getLogger(__name__)

TOOL_OK, TOOL_ISOLATED, TOOL_CONSECUTIVE = 0.1, -0.1, -0.2
FORMAT_OK, FORMAT_BAD = 0.1, -0.2
ORM_MAX = 0.5
WEIGHT_NAMES = ("tool", "format", "prm", "orm")


def tool_step_rewards(successes: Sequence[bool]) -> list[float]:
    """Eq. 6 per tool-call step: +0.1 success, −0.1 failure after a success (or first), −0.2 after a failure."""
    out, prev = [], True  # c_0 = 1
    for ok in successes:
        out.append(TOOL_OK if ok else TOOL_ISOLATED if prev else TOOL_CONSECUTIVE)
        prev = ok
    return out


def format_step_rewards(ok: Sequence[bool]) -> list[float]:
    """Eq. 7 per step: +0.1 correct, −0.2 incorrect."""
    return [FORMAT_OK if x else FORMAT_BAD for x in ok]


def step_tool_success(step: Step) -> bool | None:
    """c_t of the step, None when it has no tool call (see the module docstring)."""
    if not step.tool_calls:
        return None
    return all(c.valid for c in step.tool_calls) and bool(step.responses) and all(r.ok for r in step.responses)


def step_format_ok(step: Step, last: bool) -> bool:
    allowed = {("think", "tool_call")} | ({("think", "answer")} if last else set())
    return not step.problems and not step.stray_text and step.layout in allowed


def tool_successes(traj: Trajectory) -> list[bool]:
    """c_t of every step that has a tool call, in order."""
    return [c for c in map(step_tool_success, traj.steps) if c is not None]


def format_oks(traj: Trajectory) -> list[bool]:
    n = len(traj.steps)
    return [step_format_ok(s, i == n - 1) for i, s in enumerate(traj.steps)]


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w]+|_", " ", text).split())


def prm_reward(traj: Trajectory, entities: Iterable[str], aliases: Mapping[str, Iterable[str]] | None = None
               ) -> float | None:
    """Eq. 8: the share of entities found in the thoughts or tool observations, in [0, 1].

    Matching is on normalised text (NFKC, case-folded, every run of non-alphanumerics one space) and on
    whole words ("Rome" does not match "chromosome"). An entity counts when it or one of
    ``aliases[entity]`` matches. Thoughts are the closed ``<think>`` blocks; observations the ok tool
    responses (errors and "No results found", which echo the agent's own query, are left out). The
    answer is never searched. Entities are de-duplicated after normalisation; with none (M = 0) the
    reward is undefined and None is returned.
    """
    aliases = aliases or {}
    forms: dict[str, set[str]] = {}
    for entity in entities:
        key = _normalise(entity)
        if key:
            forms.setdefault(key, {key}).update(a for a in map(_normalise, aliases.get(entity, ())) if a)
    if not forms:
        return None
    seen = [*traj.thinks, *(r.text for r in traj.tool_responses if r.ok)]
    haystack = f" {' '.join(_normalise(t) for t in seen)} "
    return sum(any(f" {f} " in haystack for f in fs) for fs in forms.values()) / len(forms)


@dataclass(frozen=True)
class Weights:
    """λ of Eq. 9: each ≥ 0, summing to 1, λ_ORM ≤ 0.5 (the paper's constraint); checked on creation."""

    tool: float
    format: float
    prm: float
    orm: float

    def __post_init__(self) -> None:
        values = asdict(self)
        if any(v < 0 for v in values.values()) or abs(sum(values.values()) - 1) > 1e-9 or self.orm > ORM_MAX + 1e-9:
            raise ValueError(f"weights must be >= 0, sum to 1 and have orm <= {ORM_MAX}: {values}")

    @classmethod
    def from_dict(cls, values: Mapping[str, float]) -> Weights:
        """Exactly the keys tool, format, prm, orm; a missing or extra key is an error, never a default."""
        if set(values) != set(WEIGHT_NAMES):
            raise ValueError(f"weights need exactly the keys {WEIGHT_NAMES}, got {sorted(values)}")
        return cls(**{k: float(values[k]) for k in WEIGHT_NAMES})

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


INITIAL_WEIGHTS = Weights(tool=0.6, format=0.3, prm=0.1, orm=0.0)


@dataclass(frozen=True)
class SearchRLScore:
    total: float | None  # Eq. 9, in [−0.2, 1]; None (unscored) when a signal with weight > 0 is missing
    orm: float | None
    prm: float | None
    tool: float  # (1/T)·Σ r_tool, in [−0.2, 0.1]
    format: float  # (1/T)·Σ r_format, in [−0.2, 0.1]
    tool_success_rate: float | None  # share of tool-call steps that succeeded; None without any
    format_rate: float | None  # share of steps with correct format; None without steps
    weights: Weights
    tool_steps: list[float] = field(default_factory=list)
    format_steps: list[float] = field(default_factory=list)


def search_rl_reward(traj: Trajectory, entities: Iterable[str], orm: float | None, weights: Weights,
                     aliases: Mapping[str, Iterable[str]] | None = None) -> SearchRLScore:
    """Eq. 9 with its parts. ``orm`` is the judges' majority vote (0/1, any value in [0, 1] accepted), None
    when the judges failed; a None ORM or PRM (no entities) with a positive weight makes ``total`` None."""
    if orm is not None and not 0 <= orm <= 1:
        raise ValueError(f"orm must lie in [0, 1] (got {orm})")
    successes, oks = tool_successes(traj), format_oks(traj)
    tool_steps, format_steps = tool_step_rewards(successes), format_step_rewards(oks)
    n = len(traj.steps)
    tool = sum(tool_steps) / n if n else 0.0
    fmt = sum(format_steps) / n if n else 0.0
    prm = prm_reward(traj, entities, aliases)
    missing = (orm is None and weights.orm > 0) or (prm is None and weights.prm > 0)
    total = None if missing else (weights.orm * (orm or 0.0) + weights.prm * (prm or 0.0)
                                  + weights.tool * tool + weights.format * fmt)
    return SearchRLScore(total, orm, prm, tool, fmt, sum(successes) / len(successes) if successes else None,
                         sum(oks) / n if n else None, weights, tool_steps, format_steps)


def scheduler_metrics(scores: Iterable[SearchRLScore | Mapping[str, Any]]) -> dict[str, float]:
    """Batch means for :meth:`CoefficientScheduler.update`: ``tool_success_rate``, ``format_rate``,
    ``prm_coverage`` (each over the scores where it is defined; a key is left out when none is). A score is a
    :class:`SearchRLScore` or the scorer's details mapping of one."""
    scores = list(scores)
    out = {}
    for key, attr in (("tool_success_rate", "tool_success_rate"), ("format_rate", "format_rate"),
                      ("prm_coverage", "prm")):
        values = [v for s in scores
                  if (v := (s.get(attr) if isinstance(s, Mapping) else getattr(s, attr))) is not None]
        if values:
            out[key] = sum(values) / len(values)
    return out


# ------------------------------------------------------------ coefficient scheduler

PHASES = ("tool", "format", "prm")  # the order the paper describes; "prm" waits for the other two
PHASE_METRIC = {"tool": "tool_success_rate", "format": "format_rate", "prm": "prm_coverage"}


class CoefficientScheduler:
    """Threshold-triggered λ schedule of MindDR §5.2, starting from (0.6, 0.3, 0.1, 0.0).

    :meth:`update` takes the batch metrics of a training step (:func:`scheduler_metrics`). A phase fires
    once, when its metric has been ≥ its threshold for ``patience`` consecutive updates:

    * ``tool`` (``tool_success_rate`` ≥ ``tool_threshold``, tool invocation saturates): λ_tool drops to
      ``tool_floor``, the released weight goes to λ_PRM;
    * ``format`` (``format_rate`` ≥ ``format_threshold``, format compliance is stable): λ_format drops to
      ``format_floor``, the released weight goes to λ_PRM;
    * ``prm`` (``prm_coverage`` ≥ ``prm_threshold``, counted only once both others fired; PRM coverage
      matures): λ_PRM drops to max(``prm_floor``, 1 − λ_tool − λ_format − 0.5) and λ_ORM = 1 − the
      others takes the rest, so λ_ORM never exceeds 0.5.

    With the defaults the weights go (0.6, 0.3, 0.1, 0) → (0.2, 0.3, 0.5, 0) → (0.2, 0.1, 0.7, 0) →
    (0.2, 0.1, 0.2, 0.5). A metric a pending phase needs must be in ``metrics`` (ValueError otherwise).
    Every transition is logged (``logging`` at INFO) and appended to :attr:`transitions` as
    ``{"step", "phase", "reason", "old", "new"}``; :meth:`state_dict` / :meth:`load_state_dict` carry the
    weights, fired phases, streaks and transitions across a resumed run.
    """

    def __init__(self, initial: Weights = INITIAL_WEIGHTS, *, tool_threshold: float = 0.9,
                 format_threshold: float = 0.95, prm_threshold: float = 0.6, patience: int = 3,
                 tool_floor: float = 0.2, format_floor: float = 0.1, prm_floor: float = 0.2):
        if patience < 1:
            raise ValueError(f"patience must be at least 1 (got {patience})")
        if not (0 <= tool_floor <= initial.tool and 0 <= format_floor <= initial.format and prm_floor >= 0):
            raise ValueError("floors must lie between 0 and the initial weight they lower")
        self.initial = initial
        self.thresholds = {"tool": tool_threshold, "format": format_threshold, "prm": prm_threshold}
        self.floors = {"tool": tool_floor, "format": format_floor, "prm": prm_floor}
        self.patience = patience
        self.weights = initial
        self.fired: list[str] = []
        self.streaks = dict.fromkeys(PHASES, 0)
        self.transitions: list[dict] = []

    def pending(self) -> list[str]:
        """The phases whose metric is watched now."""
        first = [p for p in ("tool", "format") if p not in self.fired]
        return first or [p for p in ("prm",) if p not in self.fired]

    def update(self, step: int, metrics: Mapping[str, float]) -> Weights:
        pending = self.pending()
        missing = [PHASE_METRIC[p] for p in pending if PHASE_METRIC[p] not in metrics]
        if missing:
            raise ValueError(f"scheduler metrics missing: {', '.join(missing)}")
        for phase in pending:
            value = float(metrics[PHASE_METRIC[phase]])
            self.streaks[phase] = self.streaks[phase] + 1 if value >= self.thresholds[phase] else 0
            if self.streaks[phase] >= self.patience:
                self._fire(step, phase, value)
        return self.weights

    def _fire(self, step: int, phase: str, value: float) -> None:
        old = self.weights
        w = old.as_dict()
        if phase == "prm":
            w["prm"] = max(self.floors["prm"], 1 - w["tool"] - w["format"] - ORM_MAX)
        else:
            w["prm"] += w[phase] - self.floors[phase]
            w[phase] = self.floors[phase]
        w = {k: round(w[k], 12) for k in ("tool", "format", "prm")}
        self.weights = Weights(**w, orm=round(1 - sum(w.values()), 12))
        self.fired.append(phase)
        reason = (f"{PHASE_METRIC[phase]} {value:.4g} >= {self.thresholds[phase]} for {self.patience} updates")
        record = {"step": step, "phase": phase, "reason": reason, "old": old.as_dict(), "new": self.weights.as_dict()}
        self.transitions.append(record)
        log.info("coefficient schedule at step %d (%s): %s -> %s", step, reason, record["old"], record["new"])

    def state_dict(self) -> dict:
        return {"weights": self.weights.as_dict(), "fired": list(self.fired), "streaks": dict(self.streaks),
                "transitions": [dict(t) for t in self.transitions]}

    def load_state_dict(self, state: Mapping) -> None:
        if (set(state) != {"weights", "fired", "streaks", "transitions"} or set(state["streaks"]) != set(PHASES)
                or not set(state["fired"]) <= set(PHASES)):
            raise ValueError("not a CoefficientScheduler state (keys weights, fired, streaks, transitions)")
        self.weights = Weights.from_dict(state["weights"])
        self.fired = list(state["fired"])
        self.streaks = {p: int(state["streaks"][p]) for p in PHASES}
        self.transitions = [dict(t) for t in state["transitions"]]
