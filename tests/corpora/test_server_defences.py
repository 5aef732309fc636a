"""``corpus serve`` defends itself: 413 above the configured body size, lone-surrogate queries searched as U+FFFD
(200: never a stall of ASearcher's retrying client), 422 for blank ones on /scholar, 200 with nothing found for a
blank query on the peers' routes, and a burst of 500 concurrent loopback requests is answered in full."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from rubricforge.corpora.server import create_app
from support.config import derive
from support.net import free_port

LONE_SURROGATE = b'{"queries": ["bees \\ud800 dance"]}'


def _ask(app, method: str, path: str, **kwargs) -> httpx.Response:
    async def go() -> httpx.Response:  # in-process ASGI call; no lifespan, so nothing is loaded
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://rf") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


def test_bodies_above_the_limit_get_413(small_index_cfg):
    app = create_app(derive(small_index_cfg, "tools.server_max_body_bytes=2048"))
    big = {"queries": ["x" * 3000]}
    assert _ask(app, "POST", "/retrieve", json=big).status_code == 413

    async def chunks():  # no Content-Length: counted as it streams in
        for _ in range(4):
            yield b" " * 1000

    streamed = _ask(app, "POST", "/retrieve", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and "tools.server_max_body_bytes" in streamed.text


@pytest.mark.parametrize("body", [b'{"queries": [""]}', b'{"queries": ["  "]}'], ids=["empty", "blank"])
def test_blank_scholar_queries_get_422(small_index_cfg, body):
    resp = _ask(create_app(small_index_cfg), "POST", "/scholar", content=body,
                headers={"content-type": "application/json"})
    assert resp.status_code == 422


def test_a_lone_surrogate_is_searched_as_u_fffd_not_refused(small_index_cfg):
    """ASearcher's client retries any answer but 200 ten times, 10 s apart: a query or url holding a lone surrogate
    gets 200 (the surrogate made U+FFFD, the rest searched), on every route, and the answer is valid UTF-8 JSON."""
    app = create_app(small_index_cfg)
    plain = _ask(app, "POST", "/retrieve", json={"queries": ["bees \ufffd dance"]})  # as LONE_SURROGATE: no topk
    json_type = {"content-type": "application/json"}
    for path, body in (("/retrieve", LONE_SURROGATE), ("/scholar", LONE_SURROGATE),
                       ("/search", b'{"query": "bees \\ud800 dance", "n_docs": 3}'),
                       ("/access", b'{"urls": ["\\udfff"]}')):
        resp = _ask(app, "POST", path, content=body, headers=json_type)
        if path == "/scholar" and resp.status_code == 404:  # no scholar index on this server
            continue
        assert resp.status_code == 200, (path, resp.text)
        resp.content.decode("utf-8")
    retrieved = _ask(app, "POST", "/retrieve", content=LONE_SURROGATE, headers=json_type).json()
    assert retrieved == plain.json() and retrieved["result"][0]
    assert _ask(app, "POST", "/access", content=b'{"urls": ["\\udfff"]}', headers=json_type).json() == {"result": [None]}


@pytest.mark.parametrize("query", ["", "  \n"], ids=["empty", "blank"])
def test_a_blank_query_finds_nothing_for_asearchers_client(small_index_cfg, query):
    """ASearcher's client posts {"queries": [q], "topk": k, "return_scores": ...} to /retrieve and retries any
    answer but 200 ten times, 10 s apart: a blank query gets 200 and an empty result list, not 422."""
    app = create_app(small_index_cfg)
    for scores in (False, True):
        resp = _ask(app, "POST", "/retrieve", json={"queries": [query], "topk": 3, "return_scores": scores})
        assert (resp.status_code, resp.json()) == (200, {"result": [[]]})
    search = _ask(app, "POST", "/search", json={"query": query, "n_docs": 3})  # OpenScholar's API likewise
    assert search.status_code == 200 and search.json()["results"]["passages"] == [[]]


@pytest.mark.slow
def test_a_burst_of_500_concurrent_requests_is_answered(small_index_cfg):
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(small_index_cfg), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 180
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=500)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300, limits=limits) as client:
            replies = await asyncio.gather(*(client.post("/retrieve", json={"queries": [f"bees {i}"], "topk": 3})
                                             for i in range(500)))
        return [r.status_code for r in replies]

    try:
        assert asyncio.run(burst()) == [200] * 500
    finally:
        server.should_exit = True
        thread.join(timeout=30)
