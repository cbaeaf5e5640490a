"""Running synchronous ORM code from the async runner and consumer."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

from chatplatform.db import thread_connections_release
from chatplatform.django_internals import connection_health_checked

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

_executor: ThreadPoolExecutor | None = None
#: The pool's number of threads (fixed when it is created).
_threads = 0


def _pool() -> ThreadPoolExecutor:
    global _executor, _threads
    if _executor is None:
        _threads = getattr(settings, "DB_THREADS", 16)
        _executor = ThreadPoolExecutor(max_workers=_threads, thread_name_prefix="db")
    return _executor


def _prepare_connections() -> None:
    """Drop a connection that failed or outlived CONN_MAX_AGE, without the per-call health
    check query: a connection broken since its last use (a database restart) raises on its
    next query, which marks it, and the next call here replaces it."""
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()
        connection_health_checked(connection)


def _in_thread(func: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    _prepare_connections()
    try:
        return func(*args, **kwargs)
    except (OperationalError, InterfaceError):
        if any(c.in_atomic_block for c in connections.all(initialized_only=True)):
            raise
        # The connection died since its last use (a database restart): the error marked it,
        # the sweep replaces it, and the step runs once more. Each step is one idempotent
        # transaction, so a step that failed on a dead connection did nothing to repeat.
        _prepare_connections()
        return func(*args, **kwargs)
    finally:
        # A pooled connection goes back to the pool after each step (a persistent one stays).
        thread_connections_release()


def db(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``func`` in a thread of a pool of ``settings.DB_THREADS`` (each thread keeps its own
    persistent connection, or takes one from the connection pool for the call and gives it
    back after), with broken or expired connections replaced before the call.

    Not thread-sensitive: channels' default runs every ORM call of the process on ONE thread,
    which serialises all conversations; each step here is a self-contained transaction, so
    running on any pool thread is safe. Context variables are carried into the thread.
    """

    @functools.wraps(func)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        step: Callable[[], R] = functools.partial(_in_thread, func, *args, **kwargs)
        return await loop.run_in_executor(_pool(), context.run, step)

    return call


def on_every_thread(step: Callable[[], object], timeout: float) -> list[BaseException | None]:
    """Run ``step`` once on each thread of the pool, within ``timeout`` seconds in all. Each
    run first waits for all the others, so every one lands on a thread of its own (and waits
    for a busy thread to be free). Returns each run's error, None for a run that succeeded;
    a run not finished in time counts as a TimeoutError."""
    pool = _pool()
    threads = _threads
    barrier = threading.Barrier(threads, timeout=timeout)

    def run() -> None:
        barrier.wait()
        step()

    tasks = [pool.submit(run) for _ in range(threads)]
    done, _ = wait(tasks, timeout=timeout)
    return [task.exception() if task in done else TimeoutError("still running") for task in tasks]


def pool_connections_close(timeout: float = 10.0) -> bool:
    """Close the database connection of every thread of the pool (before a test database is
    dropped, or at shutdown), within ``timeout`` seconds; returns whether all were closed (a
    busy pool is logged, not raised)."""
    if _executor is None:
        return True
    errors = [error for error in on_every_thread(connections.close_all, timeout) if error]
    if errors:
        logger.warning("could not close the database pool's connections: %r", errors[0])
    return not errors
