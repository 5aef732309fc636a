"""The formula registry (rubricforge/rewards/registry.py): every equation a docstring cites is registered,
and the scorer computes exactly the rewards it declares."""

from __future__ import annotations

import ast
import inspect
import re

from rubricforge.rewards.registry import ALL, COLUMNS, GROUPS, PAPERS, equation_numbers, registered
from rubricforge.rewards.scorer import RewardScorer
from support.paths import ROOT

PACKAGE = ROOT / "rubricforge"
PAPER = "|".join(re.escape(p) for p in PAPERS)
# "MindDR Eq. 12", "HOTE's Eq. 2", "DeepRubric App. A.4, Eq. 14", "MindDR §5.2, Eqs. 6–9"
CITATION = re.compile(rf"\b({PAPER})(?:'s)?[ ,]*(?:§[\d.]+,?\s*|App\. [\w.]+,?\s*)?(Eqs?\.\s*\d+(?:\s*(?:[–-]|,|and)\s*\d+)*)")


def _docstrings() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 1)}",
                              " ".join((ast.get_docstring(node) or "").split())))
    return found


def test_every_equation_a_docstring_cites_is_registered():
    cited = [(where, m.group(0), equation_numbers(m.group(2)) - registered(m.group(1)))
             for where, doc in _docstrings() for m in CITATION.finditer(doc)]
    assert len(cited) >= 30  # the scan sees the package's citations (e.g. "MindDR Eq. 12", "HOTE Eq. 5")
    unregistered = [(where, text, missing) for where, text, missing in cited if missing]
    assert unregistered == [], "declare these in rubricforge/rewards/registry.py FORMULAS, then run tools/formulas.py"


def test_the_citation_scan_notices_an_unregistered_equation():
    doc = "The bonus of MindDR Eq. 99, beside HOTE's Eqs. 2–3 and Prefs Eq. 2."
    got = {m.group(1): equation_numbers(m.group(2)) - registered(m.group(1)) for m in CITATION.finditer(doc)}
    assert got == {"MindDR": {99}, "HOTE": set(), "Prefs": set()}


def test_the_preference_rubric_equations_are_registered():
    assert {1, 2, 3, 6, 7} <= registered("Prefs")


def test_the_scorer_computes_every_registered_reward_and_no_other():
    # the scorer's dispatch: reward ``name`` is the coroutine method ``_name`` (``_once`` is the memo)
    methods = {name[1:] for name, fn in vars(RewardScorer).items()
               if name.startswith("_") and not name.startswith("__") and inspect.iscoroutinefunction(fn)}
    assert methods - {"once"} == set(ALL) == set(COLUMNS)
    assert set(GROUPS) == {"deeprubric", "hote", "report", "search_rl", "prefs", "exact", "all"} and GROUPS["all"] == ALL
    assert sorted(n for g, names in GROUPS.items() if g != "all" for n in names) == sorted(ALL)  # one group each
