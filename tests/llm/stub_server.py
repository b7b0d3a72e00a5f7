"""A small OpenAI-compatible HTTP server on 127.0.0.1 for adapter tests.

Scripted: each POST to ``/v1/chat/completions`` takes the next queued reply
(status, body, delay); when the queue is empty it answers ``default``.
Every request's headers and JSON body are recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chat_body(content: str, *, prompt_tokens: int = 11, completion_tokens: int = 7) -> dict[str, Any]:
    """An OpenAI chat.completion response body."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON; str -> raw text; callable(request_json) -> dict
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class StubServer:
    """The server plus its script and its record of requests."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.default = Reply(body=chat_body("hello from the stub"))
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.port = self._httpd.server_address[1]
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-llm", daemon=True
        )

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, payload: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(payload)
            self.headers.append({k.lower(): v for k, v in headers.items()})
            return self.script.popleft() if self.script else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    payload = json.loads(raw)
                except ValueError:
                    payload = {"_raw": raw.decode("utf-8", "replace")}
                reply = server._next(payload, dict(self.headers.items()))
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body = reply.body(payload) if callable(reply.body) else reply.body
                data = body.encode() if isinstance(body, str) else json.dumps(body or {}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        return Handler
