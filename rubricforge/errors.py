"""Errors meant for people: one line that names the problem and the fix; the CLI exits 2 on them."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """Bad input or configuration. ``str(err)`` is the one line shown to the user."""

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} — {fix}" if fix else problem)


def require_file(path: str | Path, what: str, fix: str) -> Path:
    """``path`` when it is a file; else a UserError saying that it is a directory or that it is not found."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{what} {p} is a directory, not a file" if p.is_dir() else f"{what} {p} not found", fix)
    return p


class BudgetExceeded(UserError):
    """The configured cost or token budget is spent; finished work is kept and a re-run resumes."""


class RunFailed(Exception):
    """A run that ended Failed (a task that still raised after its retries), or a check that failed;
    ``str(err)`` is one line naming what failed. Finished work is kept and the same command resumes; the
    CLI exits 1."""


class ItemsFailed(RunFailed):
    """Work items (e.g. trees) that did not finish because their LLM calls kept failing (timeouts, 429, 5xx) or
    their task raised; every other item is kept, and the same command redoes exactly these."""

    def __init__(self, errors: list[str], exported: str = ""):
        """``exported``: where the rows the run finished went (a partial export), said after the errors."""
        self.errors = errors
        first = " ".join(errors[0].split())[:300] if errors else ""
        super().__init__(f"{len(errors)} items failed; re-run the same command to retry them (first: {first})"
                         + (f"; {exported}" if exported else ""))
