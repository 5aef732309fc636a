"""Install what you use: every import of an optional package sits inside ``extras.needs``, the extras
named there are the ones pyproject.toml declares, and a missing package ends in one line naming the extra."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rubricforge.errors import UserError
from rubricforge.extras import EXTRAS, needs
from support.paths import ROOT

ROOT = ROOT
OPTIONAL = {"torch", "sentence_transformers", "faiss", "llama_cpp", "datasets", "pyarrow", "networkx", "trl",
            "transformers", "prefect", "prefect_dask", "prefect_ray", "dask", "distributed", "fastapi", "uvicorn",
            "scipy", "sklearn", "ray", "vllm"}


def _unguarded_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        if isinstance(node, ast.With) and any(isinstance(i.context_expr, ast.Call)
                                              and getattr(i.context_expr.func, "id", "") == "needs"
                                              for i in node.items):
            guarded = True
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        found.extend(f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                     if n.split(".")[0] in OPTIONAL and not guarded)
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return found


def test_every_optional_import_names_its_extra():
    assert [f for p in sorted((ROOT / "rubricforge").rglob("*.py")) for f in _unguarded_imports(p)] == []


def test_the_extras_are_the_ones_pyproject_declares():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert set(extras) == {*EXTRAS, "all", "dev"}
    assert extras["all"] == [f"rubricforge[{','.join(e for e in EXTRAS if e != 'ray')}]"]
    base = " ".join(project["dependencies"])
    assert not any(heavy in base for heavy in ("torch", "llama-cpp", "prefect", "trl", "faiss", "datasets"))


def test_a_missing_package_is_a_user_error_naming_the_extra():
    with pytest.raises(UserError, match=r"no_such_pkg is not installed — install rubricforge\[local\]"):
        with needs("local"):
            import no_such_pkg  # noqa: F401
    with pytest.raises(ValueError, match="unknown extra"):
        with needs("gpu"):
            pass


@pytest.mark.parametrize(("missing", "args", "extra"), [
    ("prefect", ["build"], "flows"),
    ("fastapi", ["corpus", "serve"], "server"),
    ("datasets", ["train", "grpo", "--dataset", "d", "--model", "m"], "train"),
])
def test_the_cli_says_which_extra_to_install_with_exit_code_2(missing, args, extra, tmp_path):
    code = f"import sys; sys.modules[{missing!r}] = None; from rubricforge.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err[-2000:]
    assert f"install rubricforge[{extra}]" in err
