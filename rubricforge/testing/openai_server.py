"""A fake OpenAI-compatible chat server on loopback, for tests of code that calls a model.

``FakeOpenAI(stages={...})`` answers each ``POST .../chat/completions`` by the call's stage, which
rubricforge's client sends in the ``X-Rubricforge-Stage`` header (:data:`rubricforge.llm.request.STAGE_HEADER`):
the table maps a stage (or an ``fnmatch`` pattern such as ``"pref_item:*"``) to a :class:`Reply`, a string
(the answer's content), a list of those (taken in turn, the last one repeating) or a function of the request
body that returns one. A stage the table does not name gets HTTP 400 naming the stage, so a new call fails
loudly instead of taking another stage's answer. ``FakeOpenAI(script)`` answers the requests in order
instead, and ``FakeOpenAI(responder=fn)`` with ``fn(body)``.

It records every request body, header and stage (unless ``keep_requests=False``), and counts requests in
flight (``max_in_flight``) so concurrency limits can be checked. ``hold=n`` makes that count independent of
timing: no request is answered until ``n`` requests are in flight together (or all ``expected`` requests
of the test have arrived), so a client allowed ``n`` concurrent requests reaches ``n`` for sure, and one
that sends more shows it. ``max_in_flight_by`` counts per ``tag`` (the last message's first word).
``GET .../models`` lists ``models`` (as vLLM and llama.cpp do). A :class:`Reply` can also be a fault:
``body`` (raw bytes instead of a completion, e.g. a body without ``choices``), ``drop`` (close the
connection without answering) and extra ``headers`` (``Retry-After``). A reply's ``delay_s`` counts from the
request's arrival (its request line read), so the fake's own work (reading the body, building the answer,
other requests of a burst holding the GIL) is inside it.

    with FakeOpenAI(stages={"rubric": '{"score": 3}', "orm": [Reply(status=503), '{"correct": 1}']}) as server:
        ...  # point a role's api_base at server.api_base, model "openai/<any name>"
"""

from __future__ import annotations

import fnmatch
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

from rubricforge.llm.request import STAGE_HEADER


@dataclass
class Reply:
    """One answer: a completion with ``content`` and usage, or a fault (a status, raw ``body``, ``drop``)."""

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


Answer = Union[Reply, str, Callable[[dict[str, Any]], "Reply | str"]]
Route = Union[Answer, list[Union[Reply, str]]]


def _json(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


def _reply(answer: Reply | str) -> Reply:
    return answer if isinstance(answer, Reply) else Reply(content=answer)


class FakeOpenAI:
    """See the module docstring; use it as a context manager (the server runs inside the ``with``)."""

    def __init__(self, script: list[Reply] | None = None, responder: Callable[[dict[str, Any]], Reply] | None = None,
                 keep_requests: bool = True, hold: int = 0, expected: int = 0,
                 models: list[str] | None = None, stages: Mapping[str, Route] | None = None):
        self.script = list(script or [Reply()])
        self.routes = {k: list(v) if isinstance(v, list) else v for k, v in stages.items()} if stages else None
        self.stages: list[str] = []  # the stage of each request, in arrival order
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
        tag, stage = self.tag(body), headers.get(STAGE_HEADER.lower(), "")
        with self._cond:
            self.n_requests += 1
            if self.keep_requests:
                self.requests.append(body)
                self.headers.append(headers)
                self.stages.append(stage)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.in_flight_by[tag] = self.in_flight_by.get(tag, 0) + 1
            self.max_in_flight_by[tag] = max(self.max_in_flight_by.get(tag, 0), self.in_flight_by[tag])
            self._wait_for_company()
            if self.routes is not None:
                answer = self._route(stage)
            elif self.responder is not None:
                answer = self.responder
            else:
                return self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return _reply(answer(body) if callable(answer) else answer)

    def _route(self, stage: str) -> Answer:
        """The table's answer for ``stage`` (its own key, else the first pattern that matches); lock held."""
        assert self.routes is not None
        key = stage if stage in self.routes else next((p for p in self.routes if fnmatch.fnmatchcase(stage, p)), None)
        if key is None:
            return Reply(status=400, error=f"FakeOpenAI: no answer scripted for stage {stage!r}")
        route = self.routes[key]
        if isinstance(route, list):
            return route.pop(0) if len(route) > 1 else route[0]
        return route

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
                        data = reply.body
                    elif reply.status == 200:
                        data = _json({
                            "id": f"chatcmpl-{fake.n_requests}", "object": "chat.completion", "created": 0,
                            "model": body.get("model", "fake"),
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": reply.content}}],
                            "usage": {"prompt_tokens": reply.prompt_tokens,
                                      "completion_tokens": reply.completion_tokens,
                                      "total_tokens": reply.prompt_tokens + reply.completion_tokens}})
                    else:
                        data = _json({"error": {"message": reply.error or f"fake error {reply.status}", "type": "fake",
                                                "code": reply.status}})
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
