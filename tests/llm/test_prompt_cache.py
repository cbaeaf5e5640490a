"""The model of the provider's prompt cache: prefixes up to breakpoints, lifetimes, minimum
cacheable length, and what each part is billed."""

from __future__ import annotations

import pytest

from chatplatform.core.llm.prompt_cache import CacheUsage, PromptCache, Segment, anthropic_segments


def request(*sizes: int, marks: tuple[int, ...] = (), ttl: str = "5m") -> list[Segment]:
    return [
        Segment(f"block {i} of {n}", n, ttl if i in marks else None) for i, n in enumerate(sizes)
    ]


def test_a_growing_conversation_reads_what_the_previous_request_wrote() -> None:
    cache = PromptCache()
    first = cache.price(request(1000, 200, marks=(1,)), now=0)
    assert first == CacheUsage(uncached=0, read=0, written=1200)
    second = cache.price(request(1000, 200, 300, marks=(1, 2)), now=30)
    assert second == CacheUsage(uncached=0, read=1200, written=300)
    assert second.billed == pytest.approx(0.1 * 1200 + 1.25 * 300)


def test_what_follows_the_last_breakpoint_is_paid_in_full() -> None:
    usage = PromptCache().price(request(1000, 200, 50, marks=(1,)), now=0)
    assert usage == CacheUsage(uncached=50, read=0, written=1200)


def test_entries_expire_after_their_lifetime_and_reads_refresh_them() -> None:
    cache = PromptCache()
    cache.price(request(1000, marks=(0,)), now=0)
    assert cache.price(request(1000, marks=(0,)), now=299).read == 1000
    assert cache.price(request(1000, marks=(0,)), now=598).read == 1000  # refreshed at 299
    assert cache.price(request(1000, marks=(0,)), now=898).read == 0  # 300 s after 598
    hour = PromptCache()
    hour.price(request(1000, marks=(0,), ttl="1h"), now=0)
    usage = hour.price(request(1000, marks=(0,), ttl="1h"), now=3000)
    assert usage.read == 1000
    assert PromptCache().price(request(1000, marks=(0,), ttl="1h"), 0).billed == 2000


def test_a_prefix_shorter_than_the_minimum_is_not_cached() -> None:
    cache = PromptCache(min_tokens=1024)
    assert cache.price(request(500, 400, marks=(1,)), now=0) == CacheUsage(900, 0, 0)
    assert cache.price(request(500, 400, marks=(1,)), now=1).read == 0
    cache.price(request(500, 400, 200, marks=(1, 2)), now=2)
    assert cache.price(request(500, 400, 200, 10, marks=(3,)), now=3).read == 1100


def test_a_changed_block_invalidates_everything_after_it() -> None:
    cache = PromptCache()
    cache.price(request(1000, 200, 300, marks=(0, 2)), now=0)
    changed = [*request(1000, marks=(0,)), Segment("other", 200), Segment("block 2 of 300", 300)]
    changed[-1] = Segment("block 2 of 300", 300, "5m")
    usage = cache.price(changed, now=1)
    assert usage.read == 1000 and usage.written == 500


def test_the_lookup_walks_back_at_most_twenty_blocks() -> None:
    cache = PromptCache()
    cache.price(request(100, marks=(0,)), now=0)
    near = request(100, *[1] * 20, marks=(20,))
    assert cache.price(near, now=1).read == 100
    far = PromptCache()
    far.price(request(100, marks=(0,)), now=0)
    assert far.price(request(100, *[1] * 21, marks=(21,)), now=1).read == 0


def test_segments_follow_the_api_order_and_carry_the_lifetime() -> None:
    params = {
        "tools": [{"name": "t", "description": "d", "input_schema": {}}],
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "hello there"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "a b",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    }
                ],
            },
        ],
    }
    segments = anthropic_segments(params, lambda text: len(text.split()))
    assert [s.breakpoint_ttl for s in segments] == [None, "5m", None, "1h"]
    assert [s.tokens for s in segments][1:] == [1, 2, 2]
    assert segments[0].canonical.startswith("tool:") and segments[2].canonical.startswith("user:")


def test_the_whole_history_reads_what_its_previous_turn_wrote() -> None:
    from chatplatform.core.llm.prompt_cache import full_history_usage

    assert full_history_usage(5000, 4800) == CacheUsage(0, 4800, 200)
    assert full_history_usage(5000, None) == CacheUsage(0, 0, 5000)
    assert full_history_usage(900, 800, min_tokens=1024) == CacheUsage(900, 0, 0)
    assert full_history_usage(1500, 900, min_tokens=1024) == CacheUsage(0, 0, 1500)
