"""The HTTP retrieval server (ASearcher-compatible /retrieve and /access, plus /scholar and /health),
run for real with uvicorn on a loopback port over the session's 200-article index, and the ToolBox
through ``tools.server_url`` giving the same output as in-process."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from rubricforge.config import Config
from rubricforge.corpora.remote import RemoteRetriever
from rubricforge.corpora.server import MAX_TOPK, create_app, serve
from rubricforge.corpora.tools import RetrievalError, ToolBox, is_tool_error
from rubricforge.errors import UserError
from support.net import free_port
from support.wiki_index import BAYEUX, ENGLISH_LIT, wiki_index_cfg, with_tools

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cfg(tmp_path_factory) -> Config:
    base = wiki_index_cfg(tmp_path_factory)  # the same index doubles as the scholar index
    return with_tools(base, scholar_index_dir=base.tools.index_dir)


@pytest.fixture(scope="module")
def server_url(cfg):
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(cfg), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 180
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture(scope="module")
def http(server_url):
    with httpx.Client(base_url=server_url, timeout=60) as client:
        yield client


def test_health_lists_both_indexes(http, cfg):
    body = http.get("/health").json()
    assert body["status"] == "ok" and set(body["indexes"]) == {"search", "scholar"}
    assert body["indexes"]["search"]["n_passages"] == 201


def test_retrieve_answers_in_asearcher_format(http):
    body = http.post("/retrieve", json={"queries": ["Bayeux Tapestry", "electric guitar"], "topk": 2,
                                        "return_scores": False}).json()
    assert list(body) == ["result"] and [len(row) for row in body["result"]] == [2, 2]
    doc = body["result"][0][0]
    assert doc["id"] == BAYEUX and doc["contents"] == f"{doc['title']}\n{doc['text']}"
    assert doc["url"] == "https://en.wikipedia.org/wiki/Bayeux_Tapestry"
    # ASearcher's client: documents from "contents", urls from "url", then /access with those urls
    urls = [r["url"] for r in body["result"][1]]
    pages = http.post("/access", json={"urls": urls}).json()["result"]
    assert [p["url"] for p in pages] == urls and all(p["contents"].startswith(p["title"] + "\n") for p in pages)


def test_retrieve_with_scores_and_default_topk(http, cfg):
    rows = http.post("/retrieve", json={"queries": ["Arabic music"], "return_scores": True}).json()["result"]
    assert len(rows[0]) == cfg.tools.top_k
    scores = [item["score"] for item in rows[0]]
    assert scores == sorted(scores, reverse=True) and rows[0][0]["document"]["title"] == "Arabic music"
    assert http.post("/retrieve", json={"queries": [], "topk": 3}).json() == {"result": []}


def test_a_blank_query_among_others_finds_nothing_and_leaves_the_others_alone(http):
    alone = http.post("/retrieve", json={"queries": ["Bayeux Tapestry"], "topk": 2}).json()["result"]
    mixed = http.post("/retrieve", json={"queries": [" ", "Bayeux Tapestry", ""], "topk": 2}).json()["result"]
    assert mixed == [[], alone[0], []] and len(alone[0]) == 2


def test_bad_requests_are_rejected(http):
    assert http.post("/retrieve", json={"queries": ["x"], "topk": MAX_TOPK + 1}).status_code == 422
    assert http.post("/retrieve", json={"query": "x"}).status_code == 422
    assert http.post("/access", json={"urls": ["x"], "index": "web"}).status_code == 422


def test_access_resolves_urls_document_and_passage_ids(http):
    result = http.post("/access", json={"urls": ["https://en.wikipedia.org/wiki/English_literature", ENGLISH_LIT,
                                                 f"{ENGLISH_LIT}#0", "nowhere", ""]}).json()["result"]
    assert result[0] == result[1] == result[2] and result[3] is None and result[4] is None
    assert result[0]["passage_ids"] == [f"{ENGLISH_LIT}#0", f"{ENGLISH_LIT}#1"]
    only = http.post("/access", json={"urls": [ENGLISH_LIT], "index": "scholar"}).json()["result"]
    assert only[0]["doc_id"] == ENGLISH_LIT


def test_scholar_endpoint_searches_the_scholar_index(http):
    retrieve = http.post("/retrieve", json={"queries": ["Bayeux Tapestry"], "topk": 3}).json()
    scholar = http.post("/scholar", json={"queries": ["Bayeux Tapestry"], "topk": 3}).json()
    assert [d["id"] for d in scholar["result"][0]] == [d["id"] for d in retrieve["result"][0]]


def test_scholar_is_404_without_a_scholar_index(cfg):
    import asyncio

    async def ask() -> httpx.Response:  # in-process ASGI call; no lifespan, so nothing is loaded
        app = create_app(with_tools(cfg, scholar_index_dir=None))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            return await client.post("/scholar", json={"queries": ["x"]})

    response = asyncio.run(ask())
    assert response.status_code == 404 and "scholar" in response.json()["detail"]


def test_toolbox_through_the_server_matches_in_process(cfg, server_url):
    queries = ["Bayeux Tapestry", "electric guitar"]
    with ToolBox.from_config(cfg) as local, ToolBox.from_config(with_tools(cfg, server_url=server_url)) as remote:
        assert set(remote.retrievers) == {"search", "scholar"}
        assert remote.search(queries) == local.search(queries)
        assert remote.scholar(queries, k=2) == local.scholar(queries, k=2)
        for target in (ENGLISH_LIT, f"{ENGLISH_LIT}#1", "https://en.wikipedia.org/wiki/Bayeux_Tapestry", "nowhere"):
            assert remote.browse(target) == local.browse(target)
        assert remote.call("search", {"query": "Arabic music"}) == local.call("search", {"query": "Arabic music"})
        # scores to float32 precision: a query embedded in another batch may differ in the last bit
        assert [s.model_dump(exclude={"score"}) for s in remote.snippets] == \
            [s.model_dump(exclude={"score"}) for s in local.snippets]
        assert [s.score for s in remote.snippets] == pytest.approx([s.score for s in local.snippets], abs=1e-5)


def test_leakage_guard_and_refill_work_through_the_server(cfg, server_url):
    with ToolBox.from_config(cfg) as local:
        bayeux = local.retrievers["search"].page(BAYEUX).text
    question = " ".join(bayeux.split()[:20])
    with ToolBox.from_config(with_tools(cfg, server_url=server_url), [question]) as remote:
        got = remote.search_snippets(["Bayeux Tapestry"], k=3)
    assert len(got) == 3 and BAYEUX not in [s.passage_id for s in got] and remote.stats()["leakage_dropped"] == 1


def test_unreachable_server(cfg):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match="cannot reach the retrieval server"):
        ToolBox.from_config(with_tools(cfg, server_url=dead))
    with ToolBox({"search": RemoteRetriever(dead, retries=0)}) as tb:  # a server that went away mid-rollout
        for out in (tb.search(["x"]), tb.browse("x"), tb.call("search", {"query": "x"})):
            assert is_tool_error(out) and "cannot reach" in out
        with pytest.raises(RetrievalError):
            tb.search_snippets(["x"])
        assert tb.stats()["search_errors"] == 2


def test_serve_refuses_a_busy_port(cfg):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(UserError, match="--port"):
            serve(cfg, host="127.0.0.1", port=busy.getsockname()[1])
