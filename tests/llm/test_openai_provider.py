"""OpenAICompatibleProvider through the real ``openai`` SDK against the local fake server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chatplatform.core.llm import (
    FACT_TOOLS,
    ChatRequest,
    Done,
    ImagePart,
    InvalidRequest,
    PromptTooLong,
    ProviderUnavailable,
    RateLimited,
    RequestMessage,
    SpendCapReached,
    StreamInterrupted,
    StreamStalled,
    TextDelta,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from chatplatform.core.llm.openai_provider import OpenAICompatibleProvider
from chatplatform.core.llm.retry import NO_RETRY
from tests.fakes import behaviours as b
from tests.fakes.openai_fake import FakeOpenAI
from tests.fakes.server import unused_port_url

from .helpers import RecordingSleep, collect, collect_until_error, text_of

pytestmark = pytest.mark.asyncio

MakeProvider = Callable[..., OpenAICompatibleProvider]
REQUEST = ChatRequest(
    model="llama3.2",
    system=["You are helpful.", "Facts: the user likes tea."],
    cache_prefix=1,
    messages=[RequestMessage("user", "Hello there")],
    temperature=0.3,
    max_tokens=200,
)


async def test_streams_text_and_usage_from_the_final_chunk(
    fake_openai: FakeOpenAI, openai_provider: MakeProvider
) -> None:
    fake_openai.script(b.Reply(text="Hi! Good to see you."))
    events = await collect(openai_provider().stream(REQUEST))

    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        "Hi! ",
        "Good ",
        "to ",
        "see ",
        "you.",
    ]
    usage = events[-2]
    assert isinstance(usage, Usage)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert events[-1] == Done("end_turn", usage)


async def test_request_uses_stream_options_and_has_no_sdk_retries(
    fake_openai: FakeOpenAI, openai_provider: MakeProvider
) -> None:
    provider = openai_provider()
    await collect(provider.stream(REQUEST))

    body = fake_openai.completion_requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 200
    assert body["temperature"] == 0.3
    assert body["messages"] == [
        {"role": "system", "content": "You are helpful.\n\nFacts: the user likes tea."},
        {"role": "user", "content": "Hello there"},
    ]
    headers = fake_openai.requests[0].headers
    assert headers["authorization"] == "Bearer not-needed"
    assert provider._client.max_retries == 0


async def test_tool_calls_and_tool_history_round_trip(
    fake_openai: FakeOpenAI, openai_provider: MakeProvider
) -> None:
    call = b.FakeToolUse("save_user_fact", {"text": "The user likes tea."}, id="call_1")
    fake_openai.script(b.Reply(text="", tool_uses=(call,)))
    history = [
        RequestMessage("user", [TextPart("What is this?"), ImagePart("aGVsbG8=", "image/jpeg")]),
        RequestMessage(
            "assistant", [TextPart("Let me note."), ToolUsePart("call_0", "get_user_facts", {})]
        ),
        RequestMessage("user", [ToolResultPart("call_0", '["likes tea"]')]),
    ]
    request = ChatRequest(model="m", messages=history, tools=FACT_TOOLS)
    events = await collect(openai_provider().stream(request))

    assert [e for e in events if isinstance(e, ToolCall)] == [
        ToolCall("call_1", "save_user_fact", {"text": "The user likes tea."})
    ]
    assert isinstance(events[-1], Done) and events[-1].stop_reason == "tool_use"
    body = fake_openai.completion_requests[0]
    assert body["tools"][0]["function"]["name"] == "save_user_fact"
    assert body["tool_choice"] == "auto"
    sent = body["messages"]
    assert sent[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,aGVsbG8="},
    }
    assert sent[1]["tool_calls"][0]["function"] == {"name": "get_user_facts", "arguments": "{}"}
    assert sent[2] == {"role": "tool", "tool_call_id": "call_0", "content": '["likes tea"]'}


@pytest.mark.parametrize(
    ("behaviour", "error_class"),
    [
        (b.HttpError(500, "server_error", "boom"), ProviderUnavailable),
        (b.HttpError(400, "invalid_request_error", "bad role"), InvalidRequest),
        (
            b.HttpError(429, "rate_limit_exceeded", "later", headers={"retry-after": "1"}),
            RateLimited,
        ),
        (b.HttpError(429, "insufficient_quota", "quota"), SpendCapReached),
    ],
)
async def test_http_errors_map_to_provider_errors(
    fake_openai: FakeOpenAI,
    openai_provider: MakeProvider,
    behaviour: b.HttpError,
    error_class: type[Exception],
) -> None:
    fake_openai.script(behaviour)
    _, error = await collect_until_error(openai_provider(retry_policy=NO_RETRY).stream(REQUEST))

    assert type(error) is error_class
    assert error.status_code == behaviour.status


async def test_context_length_error_becomes_prompt_too_long(
    fake_openai: FakeOpenAI, openai_provider: MakeProvider
) -> None:
    message = (
        "This model's maximum context length is 8192 tokens. However, you requested "
        "9000 tokens (8800 in the messages, 200 in the completion)."
    )
    fake_openai.script(
        b.HttpError(400, "invalid_request_error", message, code="context_length_exceeded")
    )
    _, error = await collect_until_error(openai_provider().stream(REQUEST))

    assert isinstance(error, PromptTooLong)
    assert (error.prompt_tokens, error.max_tokens) == (9000, 8192)


async def test_retried_before_first_token(
    fake_openai: FakeOpenAI, openai_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_openai.script(b.HttpError(503, "server_error", "loading model"), b.Reply(text="Ready."))
    events = await collect(openai_provider().stream(REQUEST))

    assert text_of(events) == "Ready."
    assert sleeps.delays == [0.25]


async def test_error_chunk_mid_stream_is_an_interruption(
    fake_openai: FakeOpenAI, openai_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    fake_openai.script(b.ErrorAfter(deltas=2, error_type="server_error", message="CUDA OOM"))
    events, error = await collect_until_error(openai_provider().stream(REQUEST))

    assert isinstance(error, StreamInterrupted)
    assert error.partial_text == text_of(events) == "This reply "
    assert sleeps.delays == []


async def test_stall_and_disconnect(fake_openai: FakeOpenAI, openai_provider: MakeProvider) -> None:
    fake_openai.script(b.Stall(deltas=1, seconds=5), b.Disconnect(deltas=1))
    provider = openai_provider(idle_timeout=0.2)

    _, stalled = await collect_until_error(provider.stream(REQUEST))
    _, cut = await collect_until_error(provider.stream(REQUEST))

    assert isinstance(stalled, StreamStalled) and stalled.partial_text == "This "
    assert isinstance(cut, StreamInterrupted) and cut.partial_text == "This "


async def test_unreachable_server_after_retries(
    openai_provider: MakeProvider, sleeps: RecordingSleep
) -> None:
    _, error = await collect_until_error(
        openai_provider(base_url=f"{unused_port_url()}/v1").stream(REQUEST)
    )

    assert isinstance(error, ProviderUnavailable) and error.code == "connection_error"
    assert len(sleeps.delays) == 2  # three attempts
