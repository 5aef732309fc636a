"""The documentation: every relative link of README.md and docs/ reaches a file of the repository (and, for
a Markdown page, a heading it names), nothing points outside the repository, the README stays short, the
generated CLI reference is current, and ``mkdocs build --strict`` passes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from support.paths import ROOT, load_script

ROOT = ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")


def _links(text: str) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", text))
    return [a or b for a, b in _LINK.findall(text)]


def _slug(heading: str) -> str:
    """A heading's anchor as MkDocs (Python-Markdown's toc) makes it."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for link in _links(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.is_relative_to(ROOT):
            broken.append(f"{link} (outside the repository)")
        elif not target.exists():
            broken.append(f"{link} (no such file)")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link} (no heading with that anchor)")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_nothing_refers_outside_the_repository():
    texts = {p: p.read_text(encoding="utf-8") for p in PAGES}
    texts |= {p: p.read_text(encoding="utf-8") for d in ("rubricforge", "tests", "benchmarks", "tools")
              for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".md", ".yaml") and p != Path(__file__)}
    outside = [str(p.relative_to(ROOT)) for p, text in texts.items()
               if re.search(r"\.\./shared|seed-methods\.md|DESIGN\.md", text)]
    assert outside == []


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_bytes()) <= 12 * 1024


@pytest.mark.parametrize(("tool", "page", "markers"), [
    ("cli_reference", "cli.md", ["## `rubricforge reward score`", "--rewards"]),  # from the Typer app
    ("formulas", "formulas.md", ["| Prefs | Eq. 2, App. C.2 |", "`pref_rubric` (group `prefs`"]),  # the registry
])
def test_generated_pages_are_up_to_date(tool, page, markers):
    text = load_script(f"tools/{tool}.py").render()
    assert all(marker in text for marker in markers)
    assert (ROOT / "docs" / page).read_text(encoding="utf-8") == text, (
        f"docs/{page} is out of date: run python tools/{tool}.py")


def test_mkdocs_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    proc = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "methods" / "index.html").is_file()
