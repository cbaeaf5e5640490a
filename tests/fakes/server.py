"""Run an ASGI app with uvicorn in a background thread on 127.0.0.1 and a free port.

Why Starlette + uvicorn (rather than pytest-httpserver/werkzeug): the fakes must stream SSE
with pauses (a stall mid-stream) without blocking other requests, which async handlers do
naturally; uvicorn is already a project dependency and Starlette is small and well kept.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp


class ServerThread:
    """``with ServerThread(app) as server: server.url`` -> ``http://127.0.0.1:<port>``."""

    def __init__(self, app: ASGIApp, *, start_timeout: float = 10.0) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))  # port 0: the OS picks a free port
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="off",
            loop="asyncio",
            http="h11",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._start_timeout = start_timeout

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._socket.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def unused_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (for "server is down" tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
