"""How a provider's prompt cache bills a request. Pure: no Django, no SDK.

Anthropic's rules, which :class:`PromptCache` follows:

* a request is read in the order tools, system, messages, one content block after another;
* a block marked ``cache_control`` is a breakpoint: the prefix up to and including it is
  written to the cache (at most four breakpoints per request);
* a later request whose prefix up to one of its block boundaries equals a cached prefix reads
  it; the lookup starts at each breakpoint and walks back at most :data:`LOOKBACK_BLOCKS`
  blocks, so a conversation that appends a turn finds the prefix its previous request wrote;
* a prefix shorter than the model's minimum cacheable length is silently not cached;
* an entry lives for its TTL (5 minutes or 1 hour) after it was last written or read.

Billing: tokens read cost :data:`READ_MULTIPLIER` of the input price, tokens written
:data:`WRITE_MULTIPLIER` for the TTL, the rest full price.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}
WRITE_MULTIPLIER: dict[str, float] = {"5m": 1.25, "1h": 2.0}
READ_MULTIPLIER = 0.1
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20


def still_cached(sent_at: datetime | None, now: datetime, ttl: str = "5m") -> bool:
    """Whether what a request sent at ``sent_at`` wrote to the cache is still there at ``now``
    (no request in between read it)."""
    if sent_at is None:
        return False
    return (now - sent_at).total_seconds() < TTL_SECONDS.get(ttl, TTL_SECONDS["5m"])


@dataclass(frozen=True, slots=True)
class Segment:
    """One block of a request in caching order: its canonical form, its tokens, and the TTL
    of its breakpoint (``None``: not a breakpoint)."""

    canonical: str
    tokens: int
    breakpoint_ttl: str | None = None


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """A request's prompt tokens split as the provider bills them."""

    uncached: int
    read: int
    written: int
    ttl: str = "5m"

    @property
    def total(self) -> int:
        return self.uncached + self.read + self.written

    @property
    def billed(self) -> float:
        """In input-token equivalents: uncached + write multiplier x written + 0.1 x read."""
        return (
            self.uncached + WRITE_MULTIPLIER.get(self.ttl, 1.25) * self.written + self.billed_read
        )

    @property
    def billed_read(self) -> float:
        """What the cache reads add to :attr:`billed`."""
        return READ_MULTIPLIER * self.read


@dataclass
class PromptCache:
    """The cache of one organisation, on a clock the caller gives (seconds)."""

    min_tokens: int = 0
    entries: dict[str, float] = field(default_factory=dict)

    def price(self, segments: Sequence[Segment], now: float) -> CacheUsage:
        """Bill one request at time ``now`` and update the cache as the provider would."""
        self.entries = {key: expiry for key, expiry in self.entries.items() if expiry > now}
        running = hashlib.sha256()
        keys: list[str] = []
        totals: list[int] = []
        total = 0
        for segment in segments:
            running.update(segment.canonical.encode())
            running.update(b"\x00")
            total += segment.tokens
            keys.append(running.hexdigest())
            totals.append(total)
        marks = [i for i, s in enumerate(segments) if s.breakpoint_ttl][:MAX_BREAKPOINTS]
        if not marks:
            return CacheUsage(total, 0, 0)
        read_at = -1
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                if keys[i] in self.entries and i > read_at:
                    read_at = i
                    break
        read = totals[read_at] if read_at >= 0 else 0
        cacheable = [m for m in marks if totals[m] >= self.min_tokens]
        ttl = segments[marks[-1]].breakpoint_ttl or "5m"
        if read_at >= 0:
            self.entries[keys[read_at]] = now + TTL_SECONDS.get(
                segments[read_at].breakpoint_ttl or ttl, TTL_SECONDS["5m"]
            )
        written = 0
        for mark in cacheable:
            entry_ttl = segments[mark].breakpoint_ttl or ttl
            self.entries[keys[mark]] = now + TTL_SECONDS.get(entry_ttl, TTL_SECONDS["5m"])
            if mark > read_at:
                written = totals[mark] - read
        return CacheUsage(total - read - written, read, written, ttl)


def anthropic_segments(params: dict[str, Any], count: Any) -> list[Segment]:
    """The segments of Messages API parameters (``tools``, ``system``, ``messages``), each
    block counted with ``count(text) -> int``."""
    segments: list[Segment] = []

    def add(kind: str, block: Any) -> None:
        if isinstance(block, str):
            block = {"type": "text", "text": block}
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        text = plain.get("text") if plain.get("type") == "text" else json.dumps(plain)
        marked = block.get("cache_control")
        ttl = str(marked.get("ttl", "5m")) if isinstance(marked, dict) else None
        canonical = kind + json.dumps(plain, sort_keys=True)
        segments.append(Segment(canonical, int(count(str(text))), ttl))

    for tool in params.get("tools") or []:
        add("tool:", tool)
    system = params.get("system") or []
    for block in [system] if isinstance(system, str) else system:
        add("system:", block)
    for message in params.get("messages", []):
        content = message.get("content")
        blocks: Iterable[Any] = [content] if isinstance(content, str) else content
        for block in blocks:
            add(f"{message.get('role')}:", block)
    return segments


def full_history_usage(
    total: int, previous: int | None, *, min_tokens: int = 0, ttl: str = "5m"
) -> CacheUsage:
    """What sending the whole history (``total`` prompt tokens) would have been billed as,
    with a breakpoint on the newest message: while the previous turn's whole-history prompt
    (``previous`` tokens; ``None`` when the cache has expired or there was none) is cached,
    it is read and the rest written; otherwise all of it is written, or, shorter than the
    minimum cacheable length, sent uncached."""
    if total < min_tokens:
        return CacheUsage(total, 0, 0, ttl)
    read = min(previous, total) if previous is not None and previous >= min_tokens else 0
    return CacheUsage(0, read, total - read, ttl)
