"""Our retry policy for model calls (the SDKs' own retries are disabled: ``max_retries=0``).

What is retried: errors whose ``retryable`` is True, i.e. 429 with retry-after
(:class:`RateLimited`), 529 (:class:`Overloaded`), 5xx / timeouts / connection failures
(:class:`ProviderUnavailable`) and a stall before any event (:class:`StreamStalled`). Only while
nothing has been yielded to the caller: once text went out, a failure propagates (as
:class:`StreamInterrupted` from the provider). Not retried: a 429 without retry-after
(:class:`SpendCapReached`), a retry-after longer than the cap (waiting less would only hit the
limit again; the error carries ``retry_after`` for the caller), and every 4xx.

Delays are "full jitter" exponential backoff: ``uniform(0, min(max_delay, base_delay * 2**n))``
for the n-th retry; a retry-after is honoured exactly when it is within ``max_delay``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from .base import StreamEvent, Usage
from .errors import ProviderError, RateLimited

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` counts the first try; delays are in seconds."""

    max_attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0

    def backoff(self, retry_number: int, rng: Callable[[], float] = random.random) -> float:
        """Full-jitter delay before retry ``retry_number`` (0 for the first retry)."""
        ceiling = min(self.max_delay, self.base_delay * (2**retry_number))
        return rng() * ceiling

    def delay_for(
        self, error: ProviderError, retry_number: int, rng: Callable[[], float] = random.random
    ) -> float | None:
        """Seconds to wait before retrying after ``error``, or None when it must not be retried."""
        if not error.retryable or retry_number + 1 >= self.max_attempts:
            return None
        if isinstance(error, RateLimited):
            # The server said when; sooner is pointless, much later is the caller's decision.
            return error.retry_after if error.retry_after <= self.max_delay else None
        return self.backoff(retry_number, rng)


NO_RETRY = RetryPolicy(max_attempts=1)


async def stream_with_retry(
    attempt: Callable[[], AsyncIterator[StreamEvent]],
    policy: RetryPolicy,
    *,
    sleep: Sleep = asyncio.sleep,
    rng: Callable[[], float] | None = None,
) -> AsyncIterator[StreamEvent]:
    """Yield the events of ``attempt()``, starting it again on a retryable error.

    ``attempt`` opens a fresh stream on each call. A retry happens only if the failed attempt
    yielded nothing but usage; the last error is raised unchanged when the policy gives up,
    so an error never turns into an empty, successful stream.
    """
    rng = rng or random.random
    retry_number = 0
    while True:
        yielded = False
        events = attempt()
        try:
            try:
                async for event in events:
                    # A usage report (the prompt's, at the stream's start) is not part of
                    # the reply: an attempt that sent only that may still be retried.
                    yielded = yielded or not isinstance(event, Usage)
                    yield event
            finally:
                # Close the attempt's stream now (releasing its connection), not at GC time.
                close = getattr(events, "aclose", None)
                if close is not None:
                    await close()
            return
        except ProviderError as error:
            delay = None if yielded else policy.delay_for(error, retry_number, rng)
            if delay is None:
                raise
            logger.warning(
                "model call failed (%s), retry %d/%d in %.2fs",
                error.code,
                retry_number + 1,
                policy.max_attempts - 1,
                delay,
            )
            await sleep(delay)
            retry_number += 1
