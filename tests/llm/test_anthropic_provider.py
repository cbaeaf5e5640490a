"""AnthropicProvider through the real ``anthropic`` SDK against the local fake server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chatplatform.core.llm import (
    FACT_TOOLS,
    AuthenticationFailed,
    ChatRequest,
    Done,
    ImagePart,
    InvalidRequest,
    Overloaded,
    PromptTooLong,
    ProviderUnavailable,
    RequestMessage,
    RequestTooLarge,
    SpendCapReached,
    StreamInterrupted,
    StreamStalled,
    TextDelta,
    TextPart,
    ToolCall,
    Usage,
)
from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.base import ContentPart
from chatplatform.core.llm.retry import NO_RETRY
from tests.fakes import behaviours as b
from tests.fakes.anthropic_fake import FakeAnthropic
from tests.fakes.server import unused_port_url

from .helpers import collect, collect_until_error, text_of

pytestmark = pytest.mark.asyncio

MakeProvider = Callable[..., AnthropicProvider]
SYSTEM_PROMPT = "You are the platform's assistant. Be brief and kind. " * 20
FACTS = "Known facts about the user:\n- The user lives in Kyiv.\n- The user likes tea."


def turn(text: str, **fields: object) -> ChatRequest:
    options: dict[str, object] = {
        "model": "claude-test",
        "system": [SYSTEM_PROMPT, FACTS, "Retrieved: nothing relevant this turn."],
        "cache_prefix": 2,
        "messages": [RequestMessage("user", text)],
    }
    options.update(fields)
    return ChatRequest(**options)  # type: ignore[arg-type]


async def test_streams_text_deltas_then_usage_and_done(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    fake_anthropic.script(b.Reply(text="Привіт! Як справи сьогодні?"))
    events = await collect(anthropic_provider().stream(turn("hi")))

    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 4
    assert text_of(events) == "Привіт! Як справи сьогодні?"
    assert isinstance(events[-2], Usage)
    assert events[-1] == Done("end_turn", events[-2])
    assert events[-2].output_tokens > 0


async def test_request_carries_model_limits_and_sdk_retries_are_off(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    provider = anthropic_provider()
    await collect(provider.stream(turn("hi", max_tokens=321)))

    assert provider._client.max_retries == 0

    (recorded,) = fake_anthropic.requests_to("/v1/messages")
    assert recorded.body["model"] == "claude-test"
    assert recorded.body["max_tokens"] == 321
    assert recorded.body["stream"] is True
    # This SDK sends the key as a bearer token (older ones used x-api-key).
    auth = recorded.headers.get("x-api-key") or recorded.headers["authorization"]
    assert auth.endswith("test-key")
    assert recorded.headers["x-stainless-timeout"] == "5.0"  # provider default applied


async def test_cache_breakpoint_on_last_stable_system_block(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    await collect(anthropic_provider().stream(turn("hi", tools=FACT_TOOLS)))

    body = fake_anthropic.message_requests[0]
    marks = [("cache_control" in block) for block in body["system"]]
    assert marks == [False, True, False]  # system prompt + facts stable, retrieval per turn
    assert body["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in tool for tool in body["tools"])  # cached via the prefix
    assert [t["name"] for t in body["tools"]] == ["save_user_fact", "get_user_facts"]
    assert body["tools"][0]["input_schema"]["required"] == ["text"]


async def test_tools_get_the_breakpoint_when_no_system_block_is_stable(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    await collect(anthropic_provider().stream(turn("hi", cache_prefix=0, tools=FACT_TOOLS)))

    body = fake_anthropic.message_requests[0]
    assert all("cache_control" not in block for block in body["system"])
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_second_turn_reads_the_stable_prefix_from_cache(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    provider = anthropic_provider()
    first = (await collect(provider.stream(turn("first question"))))[-1]
    second_request = turn(
        "second question",
        system=[SYSTEM_PROMPT, FACTS, "Retrieved: an older turn about tea."],
        messages=[
            RequestMessage("user", "first question"),
            RequestMessage("assistant", "first answer"),
            RequestMessage("user", "second question"),
        ],
    )
    second = (await collect(provider.stream(second_request)))[-1]

    assert isinstance(first, Done) and isinstance(second, Done)
    assert first.usage.cache_read_tokens == 0
    assert first.usage.cache_write_tokens > 0
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
    assert second.usage.cache_write_tokens == 0
    assert second.usage.input_tokens > first.usage.input_tokens  # per-turn part grew


async def test_changed_stable_prefix_is_written_again(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    provider = anthropic_provider()
    await collect(provider.stream(turn("q")))
    changed = turn("q", system=[SYSTEM_PROMPT, FACTS + "\n- The user has a cat.", "Retrieved: -"])
    done = (await collect(provider.stream(changed)))[-1]

    assert isinstance(done, Done)
    assert done.usage.cache_read_tokens == 0
    assert done.usage.cache_write_tokens > 0


async def test_images_are_sent_as_base64_blocks(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    content: list[ContentPart] = [
        ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
        TextPart("What is it?"),
    ]
    await collect(anthropic_provider().stream(turn("", messages=[RequestMessage("user", content)])))

    blocks = fake_anthropic.message_requests[0]["messages"][0]["content"]
    assert blocks[0] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert blocks[1] == {"type": "text", "text": "What is it?"}


async def test_tool_use_is_streamed_as_a_complete_call(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    call = b.FakeToolUse("save_user_fact", {"text": "The user likes green tea.", "key": "tea"})
    fake_anthropic.script(b.Reply(text="Noted.", tool_uses=(call,)))
    events = await collect(anthropic_provider().stream(turn("I like green tea", tools=FACT_TOOLS)))

    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, c.input) for c in calls] == [(call.name, call.input)]
    assert calls[0].id.startswith("toolu_")
    assert events[-1] == Done("tool_use", events[-2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("behaviour", "error_class", "code"),
    [
        (b.overloaded(), Overloaded, "overloaded"),
        (b.server_error(500), ProviderUnavailable, "provider_unavailable"),
        (b.server_error(503), ProviderUnavailable, "provider_unavailable"),
        (b.spend_cap(), SpendCapReached, "spend_cap_reached"),
        (b.request_too_large(), RequestTooLarge, "request_too_large"),
        (b.invalid_request(), InvalidRequest, "invalid_request"),
        (b.HttpError(401, "authentication_error", "invalid x-api-key"), AuthenticationFailed, None),
    ],
)
async def test_http_errors_map_to_provider_errors(
    fake_anthropic: FakeAnthropic,
    anthropic_provider: MakeProvider,
    behaviour: b.HttpError,
    error_class: type[Exception],
    code: str | None,
) -> None:
    fake_anthropic.script(behaviour)
    events, error = await collect_until_error(
        anthropic_provider(retry_policy=NO_RETRY).stream(turn("hi"))
    )

    assert events == []
    assert type(error) is error_class
    assert error.status_code == behaviour.status
    assert error.partial_text == ""
    if code:
        assert error.code == code


async def test_prompt_too_long_carries_the_reported_numbers(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    fake_anthropic.script(b.prompt_too_long(210632, 200000))
    _, error = await collect_until_error(anthropic_provider().stream(turn("hi")))

    assert isinstance(error, PromptTooLong)
    assert (error.prompt_tokens, error.max_tokens) == (210632, 200000)
    assert not error.retryable
    assert len(fake_anthropic.message_requests) == 1


async def test_error_event_mid_stream_is_an_interruption_with_partial_text(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider, sleeps: object
) -> None:
    fake_anthropic.script(b.ErrorAfter(deltas=3, error_type="overloaded_error"))
    events, error = await collect_until_error(anthropic_provider().stream(turn("hi")))

    assert isinstance(error, StreamInterrupted)
    assert error.cause == "overloaded"
    assert error.partial_text == "This reply will " == text_of(events)
    assert not any(isinstance(e, Done) for e in events)
    assert len(fake_anthropic.message_requests) == 1  # never retried after text went out


async def test_error_event_before_any_text_is_retried(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    fake_anthropic.script(b.ErrorAfter(deltas=0), b.Reply(text="Recovered."))
    events = await collect(anthropic_provider().stream(turn("hi")))

    assert text_of(events) == "Recovered."
    assert len(fake_anthropic.message_requests) == 2


async def test_stall_mid_stream_raises_stream_stalled(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    fake_anthropic.script(b.Stall(deltas=2, seconds=5))
    events, error = await collect_until_error(
        anthropic_provider().stream(turn("hi", idle_timeout=0.2))
    )

    assert isinstance(error, StreamStalled)
    assert error.idle_seconds == 0.2
    assert error.partial_text == text_of(events) == "This reply "
    assert len(fake_anthropic.message_requests) == 1


async def test_stream_closed_without_message_stop_is_not_a_success(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    fake_anthropic.script(b.Disconnect(deltas=2))
    events, error = await collect_until_error(anthropic_provider().stream(turn("hi")))

    assert isinstance(error, StreamInterrupted)
    assert error.partial_text == text_of(events) == "This reply "


async def test_unreachable_server_is_provider_unavailable(
    anthropic_provider: MakeProvider, sleeps: object
) -> None:
    provider = anthropic_provider(base_url=unused_port_url())
    _, error = await collect_until_error(provider.stream(turn("hi")))

    assert isinstance(error, ProviderUnavailable)
    assert error.code == "connection_error"
    assert error.retryable


async def test_consumer_stopping_early_releases_the_stream(
    fake_anthropic: FakeAnthropic, anthropic_provider: MakeProvider
) -> None:
    provider = anthropic_provider()
    fake_anthropic.script(b.Reply(text="one two three four", delay=0.01))
    stream = provider.stream(turn("hi"))
    prompt = await anext(stream)  # the prompt's usage, reported as the reply starts
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]

    assert isinstance(prompt, Usage) and prompt.total_input_tokens > 0
    assert prompt.output_tokens <= 1
    assert first == TextDelta("one ")
    assert text_of(await collect(provider.stream(turn("again")))) == "Hello from the fake model."
