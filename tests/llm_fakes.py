"""A fake OpenAI-compatible chat server on loopback, for driving the real litellm backend in tests.

``FakeOpenAI(script)`` serves ``POST .../chat/completions``: each request takes the next :class:`Reply`
from the script (the last one repeats once the script is used up); ``FakeOpenAI(responder=fn)`` answers
each request with ``fn(body)`` instead (``benchmarks/synthesis.py`` builds schema-valid answers that way).
It records every request body and header (unless ``keep_requests=False``), and counts requests in flight
(``max_in_flight``) so concurrency limits can be checked. ``hold=n`` makes that count independent of
timing: no request is answered until ``n`` requests are in flight together (or all ``expected`` requests
of the test have arrived), so a client allowed ``n`` concurrent requests reaches ``n`` for sure, and one
that sends more shows it. ``max_in_flight_by`` counts per ``tag`` (the last message's first word).
``GET .../models`` lists ``models`` (as vLLM and llama.cpp do). A :class:`Reply` can also be a fault:
``body`` (raw bytes instead of a completion, e.g. a body without
``choices``), ``drop`` (close the connection without answering) and extra ``headers`` (``Retry-After``).
A reply's ``delay_s`` counts from the request's arrival (its request line read), so the fake's own work
(reading the body, building the answer, other requests of a burst holding the GIL) is inside it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel


@dataclass
class Reply:
    content: str = '{"capital": "Paris"}'
    status: int = 200
    delay_s: float = 0.0
    prompt_tokens: int = 11
    completion_tokens: int = 7
    error: str = ""  # the error message of a non-200 reply
    body: bytes | None = None  # send these bytes as the body instead (status as given)
    drop: bool = False  # close the connection without an answer
    headers: dict[str, str] | None = None  # extra response headers, e.g. {"retry-after": "2"}


# a held request stops waiting after this (a client that never reaches ``hold``): a failed assertion, not a hang
HOLD_TIMEOUT_S = 60.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default listen backlog (5) drops connections of a burst: 1 s SYN retries


class FakeOpenAI:
    def __init__(self, script: list[Reply] | None = None, responder: Callable[[dict[str, Any]], Reply] | None = None,
                 keep_requests: bool = True, hold: int = 0, expected: int = 0,
                 models: list[str] | None = None):
        self.script = list(script or [Reply()])
        self.models = models or ["fake-model"]
        self.in_flight_by: dict[str, int] = {}
        self.max_in_flight_by: dict[str, int] = {}
        self.responder, self.keep_requests = responder, keep_requests
        self.n_requests = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.connections: set[tuple[str, int]] = set()  # the client addresses that sent a request
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.hold(hold, expected)
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @staticmethod
    def tag(body: dict[str, Any]) -> str:
        messages = body.get("messages") or [{}]
        words = str(messages[-1].get("content", "")).split()
        return words[0] if words else ""

    def hold(self, in_flight: int, expected: int) -> None:
        """From now on answer no request until ``in_flight`` requests are in flight together, or until all
        ``expected`` requests have arrived (0: answer at once); ``max_in_flight`` (and per tag) starts again from 0."""
        with self._cond:
            self._hold, self._expected, self._arrived, self._peaks = in_flight, expected, 0, 0
            self.max_in_flight, self.max_in_flight_by = 0, {}

    def _wait_for_company(self) -> None:
        """Called with the lock held, by a request just counted in flight."""
        self._arrived += 1
        if not self._hold:
            return
        if self.in_flight >= self._hold or self._arrived >= self._expected:
            self._peaks += 1
            self._cond.notify_all()
            return
        seen = self._peaks
        self._cond.wait_for(lambda: self._peaks > seen, timeout=HOLD_TIMEOUT_S)

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        tag = self.tag(body)
        with self._cond:
            self.n_requests += 1
            if self.keep_requests:
                self.requests.append(body)
                self.headers.append(headers)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.in_flight_by[tag] = self.in_flight_by.get(tag, 0) + 1
            self.max_in_flight_by[tag] = max(self.max_in_flight_by.get(tag, 0), self.in_flight_by[tag])
            self._wait_for_company()
            if self.responder is None:
                return self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return self.responder(body)

    def _done(self, body: dict[str, Any]) -> bool:
        with self._lock:
            self.in_flight -= 1
            self.in_flight_by[self.tag(body)] -= 1
        return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers: a client need not connect per request
            # TCP_NODELAY, as real servers: the body, sent after the headers, is not held back by Nagle's
            # algorithm until the client's delayed ACK (40 ms on Linux) of the headers
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def parse_request(self) -> bool:
                self.arrived = time.monotonic()  # a reply's delay counts from here, not after the fake's own work
                return super().parse_request()

            def do_GET(self) -> None:  # noqa: N802
                if not self.path.rstrip("/").endswith("/models"):
                    self.send_error(404)
                    return
                data = json.dumps({"object": "list", "data": [{"id": m, "object": "model"}
                                                              for m in fake.models]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with fake._lock:
                    fake.connections.add(self.client_address)
                reply = fake._next(body, {k.lower(): v for k, v in self.headers.items()})
                done = False
                try:
                    time.sleep(max(0.0, reply.delay_s - (time.monotonic() - self.arrived)))
                    if reply.drop:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if reply.body is not None:
                        payload = None
                    elif reply.status == 200:
                        payload: dict[str, Any] = {
                            "id": f"chatcmpl-{fake.n_requests}", "object": "chat.completion", "created": 0,
                            "model": body.get("model", "fake"),
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": reply.content}}],
                            "usage": {"prompt_tokens": reply.prompt_tokens,
                                      "completion_tokens": reply.completion_tokens,
                                      "total_tokens": reply.prompt_tokens + reply.completion_tokens}}
                    else:
                        payload = {"error": {"message": reply.error or f"fake error {reply.status}", "type": "fake",
                                             "code": reply.status}}
                    data = reply.body if payload is None else json.dumps(payload).encode()
                    done = fake._done(body)  # before the answer leaves: the client cannot send its next one earlier
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in (reply.headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError, OSError):  # the client timed out and left
                    pass
                finally:
                    if not done:
                        fake._done(body)

        return Handler


VIA_LITELLM = "litellm_proxy/fake-model"  # an OpenAI-compatible model that goes through litellm itself


def litellm_llm_config(tmp_path, server: FakeOpenAI, **role: Any) -> dict[str, Any]:
    """An ``llm`` config section whose roles all reach ``server`` as ``openai/fake-model`` (the direct HTTP
    client; ``model=VIA_LITELLM``: through litellm), with fast backoff and a cache in ``tmp_path``; ``role``
    overrides role fields, e.g. ``max_retries=2``."""
    settings = {"backend": "litellm", "model": "openai/fake-model", "api_base": server.api_base,
                "backoff_s": 0.01, "max_retries": 3, "timeout_s": 10.0, **role}
    return {"generator": settings, "verifier": settings, "judge": settings,
            "cache_path": str(tmp_path / "llm-cache.sqlite")}


class Capital(BaseModel):
    """The structured answer the transport and fault tests ask for."""

    capital: str
