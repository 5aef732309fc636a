"""What peers' clients expect of the corpus side: OpenScholar's `POST /search` (DeepRubric's scholar tool) served
by `corpus serve` and called by the scholar tool, `--save-address-to` for ASearcher/AReaL, and wiki-18 records
that keep their `url` so `/access` by url returns the whole article."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from rubricforge.config import load_config
from rubricforge.corpora.indexing import build_index
from rubricforge.corpora.openscholar import OpenScholarRetriever
from rubricforge.corpora.server import create_app, save_address
from rubricforge.corpora.tools import ToolBox

AARON = "https://en.wikipedia.org/wiki/Aaron"
RECORDS = [{"id": "17", "contents": '"Aaron"\nAaron is a prophet, high priest and the brother of Moses.', "url": AARON},
           {"id": "18", "contents": '"Aaron"\nAaron is said to have died on Mount Hor.', "url": AARON},
           {"id": "19", "contents": '"Basalt"\nBasalt is a volcanic rock formed from rapidly cooled lava.',
            "url": "https://en.wikipedia.org/wiki/Basalt"}]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wiki18")
    corpus = folder / "wiki18.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    cfg = load_config(None, {"corpus": {"source": "wiki18", "path": str(corpus)}, "embedding": {"device": "cpu"},
                             "tools": {"index_dir": str(folder / "index")}})
    build_index(cfg, progress=False)
    with TestClient(create_app(cfg)) as test_client:
        yield test_client


def test_wiki18_keeps_url_and_access_by_url_returns_the_whole_article(client):
    page = client.post("/access", json={"urls": [AARON]}).json()["result"][0]
    assert page["url"] == AARON and page["title"] == "Aaron" and page["passage_ids"] == ["17", "18"]
    assert "brother of Moses" in page["text"] and "Mount Hor" in page["text"]
    hit = client.post("/retrieve", json={"queries": ["died on Mount Hor"], "topk": 1}).json()["result"][0][0]
    assert hit["id"] == "18" and hit["url"] == AARON and hit["metadata"]["url"] == AARON


def test_openscholar_search_api_is_served(client):
    body = client.post("/search", json={"query": ["volcanic rock from lava"], "n_docs": 2,
                                        "domains": "pes2o_v3"}).json()
    assert body["n_docs"] == 2 and body["query"] == ["volcanic rock from lava"]
    assert body["results"]["IDs"][0][0] == "19" and len(body["results"]["passages"][0]) == 2
    assert body["results"]["passages"][0][0].startswith("Basalt\nBasalt is a volcanic rock")
    assert body["results"]["scores"][0][0] >= body["results"]["scores"][0][1]
    single = client.post("/search", json={"query": "brother of Moses", "n_docs": 1, "domains": "x"}).json()
    assert single["query"] == "brother of Moses" and single["results"]["IDs"] == [["17"]]


def test_the_scholar_tool_calls_an_openscholar_server(client):
    scholar = OpenScholarRetriever("/search", client=client)
    (hits,) = scholar.search(["volcanic rock from lava"], 1)
    assert hits[0].passage.id == "19" and "volcanic rock" in hits[0].passage.text
    search = OpenScholarRetriever("/search", client=client)  # any retriever will do for the search slot
    with ToolBox({"search": search, "scholar": scholar}, top_k=1, owns_retrievers=False) as tools:
        out = tools.scholar(["volcanic rock from lava"])
    assert "<snippet id=" in out and "Basalt is a volcanic rock" in out


def test_save_address_for_asearcher_clients(tmp_path):
    folder = save_address(tmp_path / "addresses", "127.0.0.1", 8123)
    assert folder == tmp_path / "addresses" / "Host127.0.0.1_IP8123.txt" and folder.read_text() == "127.0.0.1:8123"
    file = save_address(tmp_path / "addr.txt", "10.0.0.5", 9000)
    assert file.read_text() == "10.0.0.5:9000"
