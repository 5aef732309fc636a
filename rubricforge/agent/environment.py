"""The agent's tool environment for TRL rollouts (DeepRubric §4.1 "Tool environment", App. D).

TRL's GRPOTrainer (``environment_factory=``) makes one :class:`ResearchEnvironment` per rollout, exposes
its public methods ``search``, ``browse`` and ``scholar`` as tools (their names, type hints and docstrings
become the tool schema in the chat template), calls ``reset(**row)`` with the example's columns before
generation, and masks every tool-result token from the loss. Each reset forks the shared
:class:`~rubricforge.corpora.tools.ToolBox`: the same loaded indexes, but a fresh snippet store (so the
rollout's citation ids resolve) and a leakage guard that withholds passages sharing an n-gram with the
example's own question. The environment is handed to the reward functions (``environments=``), which
read its :attr:`snippets`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rubricforge.corpora.snippets import SnippetStore
from rubricforge.corpora.tools import ToolBox


class ResearchEnvironment:
    """One rollout's tools over the shared indexes."""

    def __init__(self, toolbox: ToolBox):
        self._base = toolbox
        self._tools = toolbox.fork()

    def reset(self, **row: Any) -> None:
        """Start a rollout for ``row`` (a dataset example): fresh snippets, its question kept out of results."""
        question = row.get("question")
        self._tools = self._base.fork([question] if isinstance(question, str) and question else [])

    @property
    def snippets(self) -> SnippetStore:
        return self._tools.snippets

    @property
    def toolbox(self) -> ToolBox:
        """This rollout's ToolBox (``toolbox.call(name, arguments)`` runs one parsed tool call)."""
        return self._tools

    @property
    def tool_stats(self) -> dict[str, int]:
        """Tool calls and errors per tool, snippets stored, results withheld by the leakage guard. (Public
        methods are tools to TRL, so bookkeeping is exposed as properties.)"""
        return self._tools.stats()

    def search(self, query: list[str]) -> str:
        """Search the web (the local corpus index) and return the top snippets for each query.

        Args:
            query: One or more search queries.

        Returns:
            One <snippet id=...> block per result.
        """
        return self._tools.call("search", {"query": query})

    def browse(self, url: str) -> str:
        """Open a URL (or a snippet id) returned by an earlier search and return the page's full text.

        Args:
            url: A URL or id from a previous search result.

        Returns:
            The page as a <webpage id=...> block.
        """
        return self._tools.call("browse", {"url": url})

    def scholar(self, query: list[str]) -> str:
        """Search scientific papers and return the top snippets for each query.

        Args:
            query: One or more search queries.

        Returns:
            One <snippet id=...> block per paper passage.
        """
        return self._tools.call("scholar", {"query": query})


class NoToolEnvironment:
    """HOTE's no-tool mode (§2.1): a rollout without tools. Only ``reset``, so TRL renders no tool schema in
    its prompt and runs no tool."""

    def reset(self, **row: Any) -> None:
        return None


def environment_factory(toolbox: ToolBox) -> Callable[[], ResearchEnvironment]:
    """What ``GRPOTrainer(environment_factory=...)`` takes: a new environment over ``toolbox`` per call."""
    return lambda: ResearchEnvironment(toolbox)
