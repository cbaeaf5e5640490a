"""Running the async reply pipeline from the API's synchronous views.

Under ASGI the views run in worker threads of the server's event loop: coroutines go to that
loop (``async_to_sync``), so runners started by a request live on after it, next to the
WebSocket consumers, on the same channel layer. Under WSGI (and Django's test client) there is
no such loop: coroutines go to one long-lived event loop of the process, on a daemon thread,
so runners still outlive their request and per-loop clients (Redis) stay valid.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

from asgiref.sync import async_to_sync
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

from chatplatform.db import thread_connections_release

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's event loop for WSGI requests (started on first use)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="api-async", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def is_asgi(request: HttpRequest) -> bool:
    return isinstance(request, ASGIRequest)


def run_async(
    request: HttpRequest, factory: Callable[[], Awaitable[T]], *, timeout: float | None = None
) -> T:
    """Run ``factory()`` to completion on the right loop for ``request`` and return its
    result. ``timeout`` bounds the wait under WSGI (the coroutine bounds itself otherwise).

    The calling thread's database connection goes back to the pool first (outside a
    transaction): the coroutine's steps take theirs from the same pool, and requests waiting
    here while each holding one could leave them none."""
    thread_connections_release()
    if is_asgi(request):

        async def call() -> T:
            return await factory()

        return async_to_sync(call)()
    future = asyncio.run_coroutine_threadsafe(_as_coroutine(factory), background_loop())
    return future.result(timeout)


async def _as_coroutine(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


def stream_for(
    request: HttpRequest, events: AsyncIterator[bytes]
) -> AsyncIterator[bytes] | Iterator[bytes]:
    """The response content for an async stream: as is under ASGI (the server's loop drives
    it), else a blocking iterator that drives it on the background loop, chunk by chunk."""
    if is_asgi(request):
        return events
    return _blocking(events)


def event_stream_response(
    request: HttpRequest, events: AsyncIterator[bytes]
) -> StreamingHttpResponse:
    """A server-sent events response over ``events`` (:func:`stream_for`), neither cached nor
    buffered by a proxy on the way."""
    response = StreamingHttpResponse(
        stream_for(request, events), content_type="text/event-stream; charset=utf-8"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _blocking(events: AsyncIterator[bytes]) -> Iterator[bytes]:
    loop = background_loop()
    try:
        while True:
            future = asyncio.run_coroutine_threadsafe(_next(events), loop)
            chunk = future.result()
            if chunk is None:
                return
            yield chunk
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)


async def _next(events: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await events.__anext__()
    except StopAsyncIteration:
        return None


def stop_background_loop(timeout: float = 10.0) -> None:
    """Stop the background loop (if started): its worker threads end, which closes their
    database connections. For tests and orderly shutdowns; a later call starts a new one."""
    global _loop
    with _loop_lock:
        loop, _loop = _loop, None
    if loop is None or loop.is_closed():
        return
    future = asyncio.run_coroutine_threadsafe(_shutdown(loop), loop)
    try:
        future.result(timeout)
    finally:
        loop.call_soon_threadsafe(loop.stop)


async def _shutdown(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await loop.shutdown_default_executor()
