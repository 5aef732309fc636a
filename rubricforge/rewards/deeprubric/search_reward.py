"""The search turn reward (DeepRubric Eq. 8): R_search = min(N_search / U, 1), U = 6, in [0, 1].

N_search counts the valid tool calls (search, browse and scholar; :attr:`ToolCall.valid`). With
``distinct_queries=True`` a call counts only if it brings a query not seen before in the rollout: a
search / scholar call needs at least one query string, a browse call its url, that no earlier call of
the same tool used (compared case-folded with whitespace collapsed).
"""

from __future__ import annotations

from rubricforge.rewards.trajectory import ToolCall, Trajectory

UPPER = 6


def _targets(call: ToolCall) -> set[tuple[str, str]]:
    args = call.arguments or {}
    value = args["url"] if call.name == "browse" else args["query"]
    values = [value] if isinstance(value, str) else value
    return {(call.name or "", " ".join(v.casefold().split())) for v in values}


def count_search_calls(traj: Trajectory, distinct_queries: bool = False) -> int:
    valid = [c for c in traj.tool_calls if c.valid]
    if not distinct_queries:
        return len(valid)
    seen: set[tuple[str, str]] = set()
    count = 0
    for call in valid:
        targets = _targets(call)
        count += not targets <= seen
        seen |= targets
    return count


def search_reward(traj: Trajectory, upper: int = UPPER, distinct_queries: bool = False) -> float:
    if upper < 1:
        raise ValueError(f"upper must be at least 1 (got {upper})")
    return min(count_search_calls(traj, distinct_queries) / upper, 1.0)
