"""Counters by stable name."""

from __future__ import annotations

import functools

from .base import CounterNotAvailable, TokenCounter
from .bpe import PUBLIC_ENCODINGS, BpeCounter
from .estimator import load_default_estimator


def available_counters() -> list[str]:
    return [*PUBLIC_ENCODINGS, "estimator"]


@functools.lru_cache(maxsize=16)
def get_counter(name: str) -> TokenCounter:
    """Return the shared counter called ``name``; raise CounterNotAvailable if unknown."""
    if name in PUBLIC_ENCODINGS:
        return BpeCounter(name)
    if name == "estimator" or name.startswith("estimator"):
        return load_default_estimator()
    raise CounterNotAvailable(f"no token counter named {name!r}")
