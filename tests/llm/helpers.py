"""Helpers for consuming provider streams in tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

from chatplatform.core.llm import ProviderError, StreamEvent, TextDelta


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


async def collect_until_error(
    stream: AsyncIterator[StreamEvent],
) -> tuple[list[StreamEvent], ProviderError]:
    """Events received before the stream raised, and the error; fails if it did not raise."""
    events: list[StreamEvent] = []
    try:
        async for event in stream:
            events.append(event)
    except ProviderError as error:
        return events, error
    raise AssertionError(f"stream ended without an error: {events}")


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


class RecordingSleep:
    """An injected ``sleep`` that returns at once and remembers the delays asked for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
