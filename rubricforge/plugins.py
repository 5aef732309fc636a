"""Plugins: rewards, judge backends, converters and eval scorers that a user adds from their own package.

A package declares entry points in one of four groups (``pyproject.toml``)::

    [project.entry-points."rubricforge.rewards"]
    brevity = "my_pkg.rewards:BREVITY"        # a rubricforge.rewards.registry.RewardSpec with its ``fn``
    [project.entry-points."rubricforge.backends"]
    echo = "my_pkg.backend:EchoBackend"       # called with the LLM config: a Backend (prepare, complete)
    [project.entry-points."rubricforge.formats"]
    mine = "my_pkg.formats.mine"              # NAME, DESCRIPTION, detect, to_rubricforge, from_rubricforge
    [project.entry-points."rubricforge.scorers"]
    length = "my_pkg.scorers:length"          # async (judge, task, report, reference) -> {"metrics": {...}}

The entry point's name is what the user types: ``--rewards brevity`` / ``train.reward=brevity``,
``llm.<role>.backend=echo``, ``convert --from mine``, ``eval --scorers length``. Each registry asks
:func:`plugins` for its group once, when it is first used; a name that a built-in already has, or a plugin that
does not load, is a one-line :class:`~rubricforge.errors.UserError` naming the package. Nothing is loaded at
``import rubricforge``.
"""

from __future__ import annotations

import functools
from typing import Any

from rubricforge.errors import UserError

GROUPS = {"rewards": "rubricforge.rewards", "backends": "rubricforge.backends", "formats": "rubricforge.formats",
          "scorers": "rubricforge.scorers"}


@functools.cache
def plugins(kind: str) -> dict[str, Any]:
    """The loaded entry points of a plugin group (``kind``: a key of :data:`GROUPS`), by name."""
    from importlib.metadata import entry_points

    found: dict[str, Any] = {}
    for point in entry_points(group=GROUPS[kind]):
        where = f"{point.value}" + (f" (package {point.dist.name})" if point.dist is not None else "")
        try:
            found[point.name] = point.load()
        except Exception as exc:  # noqa: BLE001 - any import failure of a user's package, said in one line
            raise UserError(f"the {kind} plugin '{point.name}' = {where} does not load: {type(exc).__name__}: {exc}",
                            "fix or uninstall that package") from None
    return found


def added(kind: str, built_in: Any) -> dict[str, Any]:
    """The plugins of ``kind`` whose names the built-ins (``built_in``: names) do not already use."""
    found = plugins(kind)
    if clash := sorted(set(found) & set(built_in)):
        raise UserError(f"a {kind} plugin takes the built-in name(s) {', '.join(clash)}",
                        f"rename its entry point in the group {GROUPS[kind]}")
    return found
