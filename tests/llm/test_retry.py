"""The retry policy: what is retried, when, and how long it waits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from chatplatform.core.llm import (
    ChatRequest,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
    RequestMessage,
    SpendCapReached,
    StreamEvent,
    StreamInterrupted,
    StreamStalled,
    TextDelta,
)
from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.errors import ProviderError
from chatplatform.core.llm.retry import RetryPolicy, stream_with_retry
from tests.fakes import behaviours as b
from tests.fakes.anthropic_fake import FakeAnthropic

from .helpers import RecordingSleep, collect, collect_until_error, text_of

MakeProvider = Callable[..., AnthropicProvider]
REQUEST = ChatRequest(model="claude-test", messages=[RequestMessage("user", "hello")])


# --- the policy alone ---------------------------------------------------------------------


def test_backoff_is_full_jitter_exponential_and_capped() -> None:
    policy = RetryPolicy(max_attempts=10, base_delay=0.5, max_delay=8.0)

    ceilings = [policy.backoff(n, rng=lambda: 1.0) for n in range(7)]
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert policy.backoff(3, rng=lambda: 0.0) == 0.0
    assert policy.backoff(3, rng=lambda: 0.25) == 1.0


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(max_delay=8.0)

    assert policy.delay_for(RateLimited("slow down", retry_after=3), 0) == 3
    assert policy.delay_for(RateLimited("slow down", retry_after=60), 0) is None


def test_attempts_and_retryability_limit_retries() -> None:
    policy = RetryPolicy(max_attempts=3)

    assert policy.delay_for(Overloaded("busy"), 0) is not None
    assert policy.delay_for(Overloaded("busy"), 1) is not None
    assert policy.delay_for(Overloaded("busy"), 2) is None  # third attempt was the last
    assert policy.delay_for(SpendCapReached("cap"), 0) is None
    assert policy.delay_for(StreamInterrupted("cut", partial_text="x"), 0) is None


@pytest.mark.asyncio
async def test_stream_with_retry_never_retries_after_an_event() -> None:
    calls = 0

    async def attempt() -> AsyncIterator[StreamEvent]:
        nonlocal calls
        calls += 1
        yield TextDelta("partial")
        raise StreamStalled("quiet", idle_seconds=1, partial_text="partial")

    sleep = RecordingSleep()
    events: list[StreamEvent] = []
    with pytest.raises(StreamStalled):
        async for event in stream_with_retry(attempt, RetryPolicy(), sleep=sleep):
            events.append(event)
    assert calls == 1
    assert events == [TextDelta("partial")]
    assert sleep.delays == []


@pytest.mark.asyncio
async def test_stream_with_retry_raises_the_last_error_never_an_empty_success() -> None:
    async def attempt() -> AsyncIterator[StreamEvent]:
        for _ in ():  # a generator that fails before its first event
            yield TextDelta("unreachable")  # pragma: no cover
        raise ProviderUnavailable("down")

    sleep = RecordingSleep()
    with pytest.raises(ProviderError) as raised:
        await collect(stream_with_retry(attempt, RetryPolicy(max_attempts=4), sleep=sleep))
    assert isinstance(raised.value, ProviderUnavailable)
    assert len(sleep.delays) == 3


# --- through the provider and the fake server ---------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "failure", [b.overloaded(), b.server_error(500), b.server_error(503), b.rate_limited(2)]
)
async def test_transient_errors_are_retried_then_succeed(
    fake_anthropic: FakeAnthropic,
    anthropic_provider: MakeProvider,
    sleeps: RecordingSleep,
    failure: b.HttpError,
) -> None:
    fake_anthropic.script(failure, b.Reply(text="Second time lucky."))
    events = await collect(anthropic_provider().stream(REQUEST))

    assert text_of(events) == "Second time lucky."
    assert len(fake_anthropic.message_requests) == 2
    assert len(sleeps.delays) == 1


@pytest.mark.asyncio
async def test_delays_grow_exponentially_with_jitter_and_stop_after_max_attempts(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_anthropic.script(*[b.overloaded()] * 5)
    policy = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=1.5)
    _, error = await collect_until_error(anthropic_provider(retry_policy=policy).stream(REQUEST))

    assert isinstance(error, Overloaded)
    assert len(fake_anthropic.message_requests) == 4
    # rng is fixed at 0.5 by the fixture: half of min(cap, base * 2**n)
    assert sleeps.delays == [0.25, 0.5, 0.75]


@pytest.mark.asyncio
async def test_rate_limit_waits_exactly_the_retry_after(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_anthropic.script(b.rate_limited(retry_after=3), b.Reply(text="ok"))
    await collect(anthropic_provider().stream(REQUEST))

    assert sleeps.delays == [3.0]


@pytest.mark.asyncio
async def test_rate_limit_beyond_the_cap_is_not_retried(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_anthropic.script(b.rate_limited(retry_after=120), b.Reply(text="ok"))
    _, error = await collect_until_error(anthropic_provider().stream(REQUEST))

    assert isinstance(error, RateLimited)
    assert error.retry_after == 120
    assert sleeps.delays == []
    assert len(fake_anthropic.message_requests) == 1


@pytest.mark.asyncio
async def test_429_without_retry_after_is_a_spend_cap_and_not_retried(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_anthropic.script(b.spend_cap(), b.Reply(text="ok"))
    events, error = await collect_until_error(anthropic_provider().stream(REQUEST))

    assert isinstance(error, SpendCapReached)
    assert not error.retryable
    assert events == []
    assert sleeps.delays == []
    assert len(fake_anthropic.message_requests) == 1


@pytest.mark.asyncio
async def test_no_retry_once_the_first_token_was_yielded(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_anthropic.script(b.ErrorAfter(deltas=1, error_type="api_error"), b.Reply(text="again"))
    events, error = await collect_until_error(anthropic_provider().stream(REQUEST))

    assert isinstance(error, StreamInterrupted)
    assert error.cause == "provider_unavailable"
    assert text_of(events) == "This "
    assert sleeps.delays == []
    assert len(fake_anthropic.message_requests) == 1


@pytest.mark.asyncio
async def test_stall_before_any_text_is_retried(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_anthropic.script(b.Stall(deltas=0, seconds=5), b.Reply(text="Back again."))
    request = ChatRequest(model="m", messages=[RequestMessage("user", "hi")], idle_timeout=0.2)
    events = await collect(anthropic_provider().stream(request))

    assert text_of(events) == "Back again."
    assert len(sleeps.delays) == 1
