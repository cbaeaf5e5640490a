"""Helpers shared by the SDK-backed providers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")


async def with_idle_timeout(source: AsyncIterator[T], idle_seconds: float) -> AsyncIterator[T]:
    """Yield from ``source``; raise :class:`TimeoutError` when no item came for ``idle_seconds``.

    The HTTP read timeout would also fire eventually, but it is sized for slow first tokens;
    this per-event watchdog catches a stream that started and then went quiet.
    """
    iterator = aiter(source)
    while True:
        try:
            item = await asyncio.wait_for(anext(iterator), idle_seconds)
        except StopAsyncIteration:
            return
        yield item
