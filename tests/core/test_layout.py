"""The tests' layout (docs/development.md): test modules sit in folders that mirror the package, have unique
names, and import helpers from ``support`` only, never another test module or ``conftest``."""

from __future__ import annotations

import ast

from support.paths import ROOT, TESTS

PACKAGE = ROOT / "rubricforge"
MODULES = sorted(TESTS.rglob("test_*.py"))


def _imported(path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module or "")
    return names


def test_no_test_module_imports_another_or_conftest():
    found = {f"{p.relative_to(TESTS)}: {n}" for p in [*MODULES, *(TESTS / "support").glob("*.py")]
             for n in _imported(p) if n.split(".")[0].startswith("test_") or n == "conftest"}
    assert found == set()


def test_test_modules_sit_in_folders_named_for_the_package_with_unique_names():
    folders = {p.parent.relative_to(TESTS).as_posix() for p in MODULES}
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders - subpackages == {"core", "benchmarks"}  # the top-level modules and docs; the benchmark scripts
    assert not [p.name for p in TESTS.glob("test_*.py")]  # none left at the root
    names = [p.name for p in MODULES]
    assert len(names) == len(set(names))
