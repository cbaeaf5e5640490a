"""Running synchronous ORM code from the async runner and consumer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from channels.db import database_sync_to_async

P = ParamSpec("P")
R = TypeVar("R")


def db(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``func`` in a worker thread of the pool, with stale connections closed around it.

    Not thread-sensitive: channels' default runs every ORM call of the process on ONE thread,
    which serialises all conversations; each step here is a self-contained transaction, so
    running on any pool thread (each with its own connection) is safe.
    """
    wrapped: Any = database_sync_to_async(func, thread_sensitive=False)
    return wrapped  # type: ignore[no-any-return]
