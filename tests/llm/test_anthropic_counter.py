"""AnthropicCounter (count_tokens API through the real sync SDK) and the near-budget policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatplatform.core.tokens.anthropic_counter import AnthropicCounter, count_near_budget
from chatplatform.core.tokens.base import TokenCounter
from tests.fakes import behaviours as b
from tests.fakes.anthropic_fake import COUNT_BASE_TOKENS, COUNT_MESSAGE_TOKENS, FakeAnthropic
from tests.fakes.server import unused_port_url

FRAMING = COUNT_BASE_TOKENS + COUNT_MESSAGE_TOKENS


class WordCounter(TokenCounter):
    """A cheap estimator: one token per word."""

    name = "words"

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text.split())


@pytest.fixture
def counter(fake_anthropic: FakeAnthropic) -> Iterator[AnthropicCounter]:
    counter = AnthropicCounter(
        "claude-test", fallback=WordCounter(), api_key="test-key", base_url=fake_anthropic.url
    )
    yield counter
    counter.close()


def count_calls(fake: FakeAnthropic) -> int:
    return len(fake.requests_to("/v1/messages/count_tokens"))


def test_exact_count_from_the_api_without_message_framing(
    counter: AnthropicCounter, fake_anthropic: FakeAnthropic
) -> None:
    text = "Токени рахує сам провайдер: exact, billing-grade."

    assert counter.count(text) == b.fake_token_count(text)
    assert counter.last_source == "api"
    assert counter.count_message("user", text) == b.fake_token_count(text) + FRAMING
    assert counter.name == "anthropic:claude-test"
    assert counter.count("") == 0
    sent = fake_anthropic.requests_to("/v1/messages/count_tokens")[-1].body
    assert sent == {"model": "claude-test", "messages": [{"role": "user", "content": text}]}


def test_repeated_text_is_served_from_the_lru_cache(
    counter: AnthropicCounter, fake_anthropic: FakeAnthropic
) -> None:
    first = counter.count("the same text")
    calls = count_calls(fake_anthropic)
    second = counter.count("the same text")

    assert first == second
    assert counter.last_source == "cache"
    assert count_calls(fake_anthropic) == calls
    assert counter.cache_hits == 1


def test_cache_evicts_the_least_recently_used(fake_anthropic: FakeAnthropic) -> None:
    counter = AnthropicCounter(
        "claude-test",
        fallback=WordCounter(),
        api_key="k",
        base_url=fake_anthropic.url,
        cache_size=2,
    )
    counter.count("a a")
    counter.count("b b")
    counter.count("a a")  # refresh a
    counter.count("c c")  # evicts b
    calls = count_calls(fake_anthropic)
    counter.count("a a")
    assert count_calls(fake_anthropic) == calls
    counter.count("b b")
    assert count_calls(fake_anthropic) == calls + 1


def test_falls_back_to_the_estimator_when_the_server_is_down() -> None:
    estimator = WordCounter()
    counter = AnthropicCounter(
        "claude-test", fallback=estimator, api_key="k", base_url=unused_port_url(), timeout=1
    )

    assert counter.count("three words here") == 3
    assert counter.last_source == "fallback"
    assert counter.fallbacks == 1
    assert counter.count("three words here") == 3  # not cached: the API may come back
    assert counter.fallbacks == 2


def test_api_errors_fall_back_then_recover_after_the_cooldown(
    fake_anthropic: FakeAnthropic,
) -> None:
    counter = AnthropicCounter(
        "claude-test", fallback=WordCounter(), api_key="k", base_url=fake_anthropic.url, cooldown=0
    )
    fake_anthropic.script_count_tokens(b.overloaded())

    assert counter.count("one two") == 2
    assert counter.last_source == "fallback"
    assert counter.count("one two") == b.fake_token_count("one two")
    assert counter.last_source == "api"


def test_no_key_means_estimator_only() -> None:
    counter = AnthropicCounter("claude-test", fallback=WordCounter(), api_key=None)

    assert counter.count("four words right here") == 4
    assert counter.last_source == "fallback"


@pytest.mark.parametrize(
    ("budget", "expect_exact", "expect_fits"),
    [
        (1000, False, True),  # estimate far below the budget: no API call
        (5, False, False),  # estimate far above: clearly over, no API call
        (20, True, True),  # estimate within the margin: ask the API
    ],
)
def test_count_near_budget_calls_the_api_only_near_the_budget(
    counter: AnthropicCounter,
    fake_anthropic: FakeAnthropic,
    budget: int,
    expect_exact: bool,
    expect_fits: bool,
) -> None:
    texts = ["one two three four five six seven eight nine ten", "eleven twelve thirteen"]
    result = count_near_budget(texts, WordCounter(), counter, budget=budget, margin=0.5)

    assert result.exact is expect_exact
    assert result.fits is expect_fits
    assert (count_calls(fake_anthropic) > 0) is expect_exact
    if expect_exact:
        assert result.counts == tuple(b.fake_token_count(t) for t in texts)
    else:
        assert result.tokens == 13


def test_count_near_budget_is_not_exact_when_the_api_fell_back() -> None:
    down = AnthropicCounter("m", fallback=WordCounter(), api_key="k", base_url=unused_port_url())
    result = count_near_budget(["a b c"], WordCounter(), down, budget=3, margin=0.5)

    assert result.exact is False
    assert result.tokens == 3
