"""What the fake model servers share: the script of behaviours, request records, the thread."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Self

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .behaviours import Behaviour, Reply
from .server import ServerThread


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeServer:
    """Base of the fakes: ``script(...)`` queues behaviours, ``requests`` records every call.

    Start with ``start()`` (or use the pytest fixtures); ``reset()`` between tests clears the
    script, the records and any state, and ends pending stalls.
    """

    def __init__(self, default_reply: Reply | None = None) -> None:
        self.default_reply = default_reply or Reply()
        self._initial_reply = self.default_reply
        self._script: deque[Behaviour] = deque()
        self.requests: list[RecordedRequest] = []
        self._release = threading.Event()
        self._thread: ServerThread | None = None

    # --- control (test thread) -------------------------------------------------------------

    def app(self) -> Starlette:
        raise NotImplementedError

    def start(self) -> Self:
        self._thread = ServerThread(close_connections(self.app())).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    @property
    def url(self) -> str:
        assert self._thread is not None, "fake server not started"
        return self._thread.url

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours for the next model requests, in order."""
        self._script.extend(behaviours)

    def reset(self) -> None:
        self._release.set()  # wake stalled streams of the previous test
        self._release = threading.Event()
        self._script.clear()
        self.requests.clear()
        self.default_reply = self._initial_reply  # a test's own default ends with it

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    # --- serving (server thread) -----------------------------------------------------------

    def next_behaviour(self) -> Behaviour:
        return self._script.popleft() if self._script else self.default_reply

    async def record(self, request: Request) -> dict[str, Any]:
        body = await request.json()
        self.requests.append(RecordedRequest(request.url.path, dict(request.headers), body))
        return body

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` or until :meth:`reset`/:meth:`stop`, whichever comes first."""
        release = self._release
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not release.is_set():
            await asyncio.sleep(0.01)


def close_connections(app: ASGIApp) -> ASGIApp:
    """Answer every request with ``Connection: close``.

    On a kept-alive loopback connection the client's separate header and body writes meet
    Nagle's algorithm and the server's delayed ACK: about 40 ms per request. A fresh
    connection per request avoids that and keeps the suite fast; the SDKs don't care.
    """

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await app(scope, receive, send_closing)

    return wrapped


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()
