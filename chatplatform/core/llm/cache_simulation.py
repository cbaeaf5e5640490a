"""What a provider's prompt cache would bill for one request, by the cache model of
:mod:`.prompt_cache` (Anthropic's rules: exact prefixes up to the request's breakpoints, the
model's minimum cacheable length, each entry's lifetime). Pure: no Django.

Used where no provider reports it: the offline provider's usage (it is priced like a real
model, so its demo bills what that model would), and the prompt of a reply cut off before
its provider reported any usage (the prompt was sent, so it was billed).
"""

from __future__ import annotations

from collections.abc import Callable

from .anthropic_payload import build_params
from .base import ChatRequest, Usage
from .prompt_cache import PromptCache, anthropic_segments


def simulated_prompt_usage(
    request: ChatRequest,
    cache: PromptCache,
    now: float,
    count: Callable[[str], int],
    prompt_tokens: int,
) -> Usage:
    """The prompt of ``request`` sent at ``now`` (seconds on ``cache``'s clock), split into
    uncached, read and written tokens as the provider would bill it, updating ``cache`` as
    the provider would. ``count`` counts a block's text; ``prompt_tokens`` is the prompt's
    total as the caller counted it (framing included): reads and writes are the cached
    prefixes' counts, capped by it, and the rest is billed uncached. No output tokens."""
    priced = cache.price(anthropic_segments(build_params(request), count), now)
    total = max(0, prompt_tokens)
    read = min(priced.read, total)
    written = min(priced.written, total - read)
    return Usage(
        input_tokens=total - read - written, cache_read_tokens=read, cache_write_tokens=written
    )
