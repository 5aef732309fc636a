"""Named indexes: `corpus build --name X` puts the index under <cache>/index/X, `corpus list` shows it, and
searching it by name alone (no corpus config repeated) works."""

from __future__ import annotations

import json

import pytest

from rubricforge import config as config_module
from rubricforge.config import Config, load_config
from rubricforge.corpora.catalog import list_indexes
from rubricforge.corpora.indexing import build_index
from rubricforge.corpora.tools import ToolBox
from support.cli import cli

DOCS = [{"id": "d1", "title": "Basalt", "text": "Basalt is a fine-grained volcanic rock formed from rapidly cooled lava."},
        {"id": "d2", "title": "Sourdough", "text": "Sourdough bread is leavened by wild yeast and lactobacilli."},
        {"id": "d3", "title": "Comet", "text": "A comet is an icy body that releases gas near the Sun, forming a tail."}]


def test_named_index_is_listed_and_searched_by_name_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(config_module, "INDEX_ROOT", tmp_path / "index")
    corpus = tmp_path / "rocks.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    cfg = load_config(None, {"corpus": {"source": "jsonl", "path": str(corpus)}, "tools": {"index_name": "geo"},
                             "embedding": {"device": "cpu"}})
    info = build_index(cfg, progress=False)
    assert info.path == tmp_path / "index" / "geo" and info.n_passages == 3
    (entry,) = list_indexes()
    assert (entry["name"], entry["passages"], entry["source"], entry["corpus_path"]) == ("geo", 3, "jsonl", str(corpus))
    # a config that names only the index: the default corpus settings are not used
    with ToolBox.from_config(Config(tools={"index_name": "geo"})) as tools:
        out = tools.search(["volcanic rock from lava"])
    assert "Basalt" in out.split("<snippet")[1]
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    (tmp_path / "xdg" / "rubricforge").mkdir(parents=True)
    (tmp_path / "xdg" / "rubricforge" / "index").symlink_to(tmp_path / "index")
    proc = cli("corpus", "list", env=env)
    assert proc.returncode == 0 and "geo" in proc.stderr and "jsonl" in proc.stderr


def test_index_names_are_checked():
    with pytest.raises(ValueError, match="index_name"):
        Config(tools={"index_name": "../escape"})
