"""The flows only wire jobs together (docs/design.md): of the package they import ``jobs/`` and what sits below every
layer; the one exception is ``flows/limits.py``, the Prefect implementation of the LLM client's limit registry."""

from __future__ import annotations

import ast

from support.paths import ROOT

FLOWS = ROOT / "rubricforge" / "flows"
BELOW_EVERYTHING = {"config", "errors", "extras"}


def test_flows_import_only_jobs_of_the_package():
    found = set()
    for path in sorted(FLOWS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                parts = name.split(".")
                if parts[0] == "rubricforge" and len(parts) > 1 and parts[1] not in {"flows", "jobs", *BELOW_EVERYTHING}:
                    found.add(f"{path.name}: {name}")
    assert found == {"limits.py: rubricforge.llm.limits"}
