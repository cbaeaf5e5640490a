"""Exact Claude token counts through Anthropic's ``messages.count_tokens`` API.

Billing-grade but a network call, so: an LRU cache (keyed by a sha256 of model and text, so
the cache holds digests rather than whole texts), an explicit timeout, no SDK retries, and a
fallback to a local estimator when the API is unreachable or errors. ``last_source`` tells
where the last count came from ("api", "cache" or "fallback"), so a caller can store the
right counter name beside the number. :func:`count_near_budget` is the seed's policy: estimate
first, ask the API only when the estimate is close to the budget.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import anthropic

from .base import TokenCounter

logger = logging.getLogger(__name__)

CountSource = Literal["api", "cache", "fallback"]
# The API counts a whole request: "x" as the only user message costs its framing plus 1 token.
_PROBE_TEXT = "x"
_PROBE_TEXT_TOKENS = 1


class AnthropicCounter(TokenCounter):
    """Counts with ``client.messages.count_tokens`` for ``model`` (sync SDK client).

    ``count(text)`` is the tokens of ``text`` as the content of one user message, without the
    message framing; the framing (measured once with a one-token probe) is
    ``message_overhead``, so ``count_message`` equals what the API reports for that message.
    ``timeout`` is seconds per API call. After a failed call the API is not tried again for
    ``cooldown`` seconds (the fallback answers at once). Fallback counts are not cached.
    """

    exact = True

    def __init__(
        self,
        model: str,
        *,
        fallback: TokenCounter,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 5.0,
        cache_size: int = 1000,
        cooldown: float = 30.0,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        self.model = model
        self.name = f"anthropic:{model}"
        self.fallback = fallback
        self.timeout = timeout
        self.cache_size = cache_size
        self.cooldown = cooldown
        self._down_until = 0.0
        # Without a key there is nothing to call: every count comes from the fallback.
        self._client = client
        if client is None and api_key:
            self._client = anthropic.Anthropic(
                api_key=api_key,
                base_url=base_url,
                max_retries=0,
                timeout=anthropic.Timeout(timeout, connect=min(2.0, timeout)),
                http_client=anthropic.DefaultHttpxClient(follow_redirects=False),
            )
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._framing: int | None = None
        self.last_source: CountSource | None = None
        self.cache_hits = 0
        self.fallbacks = 0

    @property
    def message_overhead(self) -> int:  # type: ignore[override]
        framing = self._framing_tokens()
        return framing if framing is not None else self.fallback.message_overhead

    def count(self, text: str) -> int:
        if not text:
            return 0
        key = hashlib.sha256(f"{self.model}\x00{text}".encode()).hexdigest()
        with self._lock:
            if (cached := self._cache.get(key)) is not None:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                self.last_source = "cache"
                return cached
        framing = self._framing_tokens()
        total = self._api_count(text) if framing is not None else None
        if framing is None or total is None:
            self.fallbacks += 1
            self.last_source = "fallback"
            return self.fallback.count(text)
        tokens = max(0, total - framing)
        with self._lock:
            self._cache[key] = tokens
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        self.last_source = "api"
        return tokens

    def _framing_tokens(self) -> int | None:
        """Per-message framing tokens (measured once); None while the API is unreachable."""
        if self._framing is None:
            probe = self._api_count(_PROBE_TEXT)
            if probe is not None:
                self._framing = max(0, probe - _PROBE_TEXT_TOKENS)
        return self._framing

    def _api_count(self, text: str) -> int | None:
        if self._client is None or time.monotonic() < self._down_until:
            return None
        try:
            result = self._client.messages.count_tokens(
                model=self.model,
                messages=[{"role": "user", "content": text}],
                timeout=anthropic.Timeout(self.timeout, connect=min(2.0, self.timeout)),
            )
        except anthropic.APIError as exc:
            # Without a cool-down every count would wait for the same failure again.
            self._down_until = time.monotonic() + self.cooldown
            logger.warning("count_tokens failed (%s): using %s", exc, self.fallback.name)
            return None
        return result.input_tokens

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


@dataclass(frozen=True)
class BudgetCount:
    """Result of :func:`count_near_budget`: ``tokens`` in total, per text in ``counts``;
    ``exact`` tells whether the exact counter produced them; ``fits`` is ``tokens <= budget``."""

    tokens: int
    counts: tuple[int, ...]
    exact: bool
    fits: bool


def count_near_budget(
    texts: Sequence[str],
    estimator: TokenCounter,
    exact_counter: TokenCounter,
    budget: int,
    margin: float = 0.1,
) -> BudgetCount:
    """Count ``texts`` against ``budget`` tokens, calling the exact counter only when needed.

    The estimate decides alone when it is clearly under or clearly over: outside
    ``budget * (1 ± margin)``. Within that band (where an estimator's error could flip the
    answer) the exact counter counts. ``margin`` is a fraction of the budget (0.1 = 10 %).
    If the exact counter fell back to its estimator for any text, the result is not exact.
    """
    estimates = tuple(estimator.count_many(list(texts)))
    estimate = sum(estimates)
    if abs(estimate - budget) > budget * margin:
        return BudgetCount(estimate, estimates, exact=False, fits=estimate <= budget)
    fallbacks_before = getattr(exact_counter, "fallbacks", 0)
    counts = tuple(exact_counter.count_many(list(texts)))
    tokens = sum(counts)
    exact = exact_counter.exact and getattr(exact_counter, "fallbacks", 0) == fallbacks_before
    return BudgetCount(tokens, counts, exact=exact, fits=tokens <= budget)
