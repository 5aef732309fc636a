"""The static HTML viewer: embedded data complete, everything escaped, passage texts resolved, and (where
Chromium is installed) the page renders the tree with the selected leaves and runs no injected code."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from rubricforge.export import write_viewer
from support.fixtures_run import PASSAGES, XSS_PASSAGE, XSS_QUERY, lookup, make_run

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
DATA = re.compile(r'<script type="application/json" id="rf-data">(.*?)</script>', re.S)


def _data(html: str) -> dict:
    (payload,) = DATA.findall(html)
    return json.loads(payload)


def test_embedded_data_has_every_tree_candidate_verdict_and_passage(tmp_path):
    run_dir = make_run(tmp_path)
    path = write_viewer(run_dir, passage_lookup=lookup)
    assert path == run_dir / "viewer" / "index.html"
    data = _data(path.read_text(encoding="utf-8"))
    assert [t["id"] for t in data["trees"]] == [f"tree-{i:04d}" for i in range(5)]
    assert sorted(data["trees"][0]["nodes"]) == ["n0", "n1", "n2", "n3", "n4", "n5", "n6"]
    assert data["trees"][0]["dropped"][0]["reason"] == "redundant"
    cands = {c["id"]: c for c in data["candidates"]}
    assert {k: (c["decision_label"], c["retained"]) for k, c in cands.items()} == {
        "tree-0000--tree": ("KEEP", True), "tree-0001--tree": ("REVISE", True), "tree-0002--tree": ("DROP", False),
        "tree-0003--tree": ("rule failure", False), "tree-0004--tree": ("REVISE", False)}
    assert cands["tree-0001--tree"]["final_question"] == "What role did Roman roads play in trade?"
    assert cands["tree-0001--tree"]["verification"]["error_tags"] == ["question_rubric_mismatch", "weak evidence"]
    assert cands["tree-0003--tree"]["verification"] is None
    assert cands["tree-0003--tree"]["status"] == "failed 1 rule check(s), not sent to the verifier"
    assert cands["tree-0004--tree"]["status"] == "the verifier's revision failed the rule checks"
    assert cands["tree-0002--tree"]["status"] == "DROP is not in build.keep_decisions"
    assert set(data["passages"]) == set(PASSAGES)  # every passage some node, statement or rubric cites
    assert data["passages"]["tree-0000-n5-p0"]["text"] == XSS_PASSAGE
    assert data["run"]["counts"]["retained"] == 2 and data["notes"] == []


def test_everything_is_escaped(tmp_path):
    run_dir = make_run(tmp_path, name="run<b>&x")
    html = write_viewer(run_dir, passage_lookup=lookup).read_text(encoding="utf-8")
    assert "<title>rubricforge · run&lt;b&gt;&amp;x</title>" in html
    assert len(re.findall(r"<script\b", html)) == 2  # the data element and the viewer's own script
    assert "<img" not in html and "</script>Bees" not in html
    assert "\\u003cscript\\u003edocument.title" in html
    data = _data(html)
    assert data["trees"][0]["nodes"]["n5"]["query"] == XSS_QUERY  # escaped in the page, exact in the data
    assert data["run"]["name"] == "run<b>&x"
    page = DATA.sub("", html)  # the page without the data: no network resources at all
    assert not re.search(r"https?:|src=|<link|@import|url\(|fetch\(|XMLHttpRequest", page)
    assert "default-src 'none'" in page


def test_passage_texts_are_left_out_with_a_note_when_no_index_matches(tmp_path):
    run_dir = make_run(tmp_path)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    cfg["tools"]["index_dir"] = str(tmp_path / "no-index")
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    data = _data(write_viewer(run_dir).read_text(encoding="utf-8"))
    assert data["passages"] == {}
    assert data["notes"] == [f"passage texts not embedded: no corpus index at {tmp_path / 'no-index'}"]


def test_tree_limit_and_empty_run(tmp_path):
    data = _data(write_viewer(make_run(tmp_path), passage_lookup=lookup, max_trees=2).read_text(encoding="utf-8"))
    assert [t["id"] for t in data["trees"]] == ["tree-0000", "tree-0001"]
    assert {c["tree_id"] for c in data["candidates"]} == {"tree-0000", "tree-0001"}
    assert data["notes"] == ["showing the first 2 of 5 trees"]
    empty = _data(write_viewer(make_run(tmp_path, only=[], name="empty"), passage_lookup=lookup).read_text())
    assert empty["trees"] == [] and empty["candidates"] == [] and empty["run"]["counts"]["generated"] == 0


def _chromium(url: str, *args: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", *args, url],
                              capture_output=True, text=True, timeout=120, check=True)
    return proc.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_chromium_renders_the_tree_and_runs_no_injected_code(tmp_path):
    run_dir = make_run(tmp_path)
    path = write_viewer(run_dir, passage_lookup=lookup)
    dom = _chromium(path.as_uri() + "#c=tree-0000--tree", "--dump-dom")
    assert "<title>rubricforge · demo</title>" in dom  # the hostile passage did not rewrite the title
    assert "<img" not in dom
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;Bees dance" in dom  # shown as text
    assert len(re.findall(r'class="node selected', dom)) == 3  # leaves n2, n4, n5
    assert re.search(r'data-node="n1"[^>]*open', dom) or re.search(r'open[^>]*data-node="n1"', dom)  # on the path
    assert "✕ dropped child: history of beekeeping" in dom
    for cid in ("tree-0000--tree", "tree-0003--tree", "tree-0004--tree"):
        assert f'data-cand="{cid}"' in dom
    revised = _chromium(path.as_uri() + "#c=tree-0001--tree", "--dump-dom")
    assert "revised by the verifier" in revised and "What role did Roman roads play in trade?" in revised
    shot = tmp_path / "viewer.png"
    _chromium(path.as_uri(), f"--screenshot={shot}", "--window-size=1400,1000")
    assert shot.stat().st_size > 10_000
