"""The offline provider bills its prompt as the model it is priced like would: cache writes
for a new prefix, cache reads of what the conversation's previous prompt cached (exact
prefix, minimum cacheable length, lifetime), the prompt's usage first, before the text."""

from __future__ import annotations

import pytest

from chatplatform.core.llm import ChatRequest, Done, RequestMessage, TextDelta, Usage
from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.core.llm.prompt_cache import PromptCache
from chatplatform.core.tokens.bpe import BpeCounter

from .helpers import collect

pytestmark = pytest.mark.asyncio

SYSTEM = "You are a careful travel assistant who answers in short sentences. " * 120
TURNS = ["Where do we stay in Lisbon?", "In Alfama, near the castle.", "And the tram?"]


def turn(n: int, *, system: str = SYSTEM) -> ChatRequest:
    """The request of the ``n``-th user message (1, 2...), laid out as the platform lays out
    an Anthropic request: the system prompt cached, then one block per turn with breakpoints
    on the history's last turn and on the new message."""
    texts = TURNS[: 2 * n - 1]
    messages = [
        RequestMessage("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)
    ]
    last = len(messages) - 1
    marks = ((last - 1, 0), (last, 0)) if last else ((0, 0),)
    return ChatRequest(
        model="offline",
        system=[system],
        cache_prefix=1,
        cache_breakpoints=marks,
        messages=messages,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def counter() -> BpeCounter:
    return BpeCounter("o200k_base")


def usage_of(events: list) -> Usage:
    usages = [e for e in events if isinstance(e, Usage)]
    return usages[-1]


async def test_the_second_turn_reads_what_the_first_wrote(counter: BpeCounter) -> None:
    clock, cache = Clock(), PromptCache(min_tokens=1024)
    provider = OfflineProvider(counter, prompt_cache=cache, clock=clock)
    first = usage_of(await collect(provider.stream(turn(1))))
    assert first.cache_read_tokens == 0 and first.cache_write_tokens > 1024
    assert first.total_input_tokens == provider.input_tokens(turn(1))
    clock.now += 60
    second = usage_of(await collect(provider.stream(turn(2))))
    # The system prompt and the first message, cached by the first turn, are read back.
    assert second.cache_read_tokens == first.cache_write_tokens
    assert second.cache_write_tokens > 0  # the new turns, up to the new message
    assert second.total_input_tokens == provider.input_tokens(turn(2))
    assert second.input_tokens < second.total_input_tokens


async def test_a_prefix_shorter_than_the_minimum_is_not_cached(counter: BpeCounter) -> None:
    clock, cache = Clock(), PromptCache(min_tokens=1024)
    provider = OfflineProvider(counter, prompt_cache=cache, clock=clock)
    for n in (1, 2):
        usage = usage_of(await collect(provider.stream(turn(n, system="Be brief."))))
        assert usage.cache_read_tokens == 0 and usage.cache_write_tokens == 0
        assert usage.input_tokens == provider.input_tokens(turn(n, system="Be brief."))


async def test_after_the_lifetime_the_prefix_is_written_again(counter: BpeCounter) -> None:
    clock, cache = Clock(), PromptCache(min_tokens=1024)
    provider = OfflineProvider(counter, prompt_cache=cache, clock=clock)
    await collect(provider.stream(turn(1)))
    clock.now += 301  # five minutes and a second: the entries have expired
    second = usage_of(await collect(provider.stream(turn(2))))
    assert second.cache_read_tokens == 0 and second.cache_write_tokens > 1024


async def test_the_prompts_usage_comes_before_the_text(counter: BpeCounter) -> None:
    provider = OfflineProvider(counter, prompt_cache=PromptCache(min_tokens=1024), clock=Clock())
    events = await collect(provider.stream(turn(1)))
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    prompt = events[0]
    assert isinstance(prompt, Usage) and first_text > 0
    assert prompt.output_tokens == 0 and prompt.cache_write_tokens > 0
    final = events[-1]
    assert isinstance(final, Done) and final.usage.output_tokens > 0
    assert final.usage.cache_write_tokens == prompt.cache_write_tokens


async def test_without_a_cache_nothing_is_read_or_written(counter: BpeCounter) -> None:
    provider = OfflineProvider(counter)
    usage = usage_of(await collect(provider.stream(turn(2))))
    assert usage.cache_read_tokens == usage.cache_write_tokens == 0
    assert usage.input_tokens == provider.input_tokens(turn(2))
