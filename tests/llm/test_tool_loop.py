"""The tool-use loop with the real SDKs: the executor runs the tool and the reply continues."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from chatplatform.core.llm import (
    FACT_TOOLS,
    ChatRequest,
    Done,
    RequestMessage,
    TextDelta,
    ToolCall,
    Usage,
    stream_with_tools,
)
from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.openai_provider import OpenAICompatibleProvider
from tests.fakes import behaviours as b
from tests.fakes.anthropic_fake import FakeAnthropic
from tests.fakes.openai_fake import FakeOpenAI

from .helpers import collect, text_of

pytestmark = pytest.mark.asyncio

REQUEST = ChatRequest(
    model="claude-test",
    system="You remember facts about the user.",
    cache_prefix=1,
    messages=[RequestMessage("user", "I moved to Lviv last month.")],
    tools=FACT_TOOLS,
)
SAVE = b.FakeToolUse("save_user_fact", {"text": "The user lives in Lviv.", "key": "home_city"})


class FactStore:
    """A stand-in for the memory app's executor."""

    def __init__(self) -> None:
        self.facts: dict[str, str] = {}
        self.calls: list[ToolCall] = []

    async def __call__(self, call: ToolCall) -> str:
        self.calls.append(call)
        if call.name == "save_user_fact":
            if len(call.input["text"]) > 100:
                raise ValueError("fact too long")
            self.facts[call.input.get("key") or call.input["text"]] = call.input["text"]
            return json.dumps({"saved": True})
        return json.dumps(sorted(self.facts.values()))


async def test_save_user_fact_runs_and_the_reply_continues(
    fake_anthropic: FakeAnthropic, anthropic_provider: Callable[..., AnthropicProvider]
) -> None:
    fake_anthropic.script(
        b.Reply(text="Let me remember that.", tool_uses=(SAVE,)),
        b.Reply(text=" Noted: you live in Lviv now."),
    )
    store = FactStore()
    events = await collect(stream_with_tools(anthropic_provider(), REQUEST, store))

    assert store.facts == {"home_city": "The user lives in Lviv."}
    assert text_of(events) == "Let me remember that. Noted: you live in Lviv now."
    assert [type(e) for e in events[-2:]] == [Usage, Done]
    done = events[-1]
    assert isinstance(done, Done) and done.stop_reason == "end_turn"
    first, second = fake_anthropic.message_requests
    assert done.usage.output_tokens > 0
    # The follow-up carries the assistant's tool_use and our tool_result, in order.
    assistant, result = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "text", "text": "Let me remember that."}
    tool_use = assistant["content"][1]
    assert tool_use["type"] == "tool_use" and tool_use["input"] == SAVE.input
    assert result["role"] == "user"
    assert result["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": tool_use["id"],
            "content": '{"saved": true}',
            "is_error": False,
        }
    ]
    assert second["tools"] == first["tools"]


async def test_usage_is_summed_over_rounds(
    fake_anthropic: FakeAnthropic, anthropic_provider: Callable[..., AnthropicProvider]
) -> None:
    fake_anthropic.script(b.Reply(text="", tool_uses=(SAVE,)), b.Reply(text="Done."))
    events = await collect(stream_with_tools(anthropic_provider(), REQUEST, FactStore()))

    done = events[-1]
    assert isinstance(done, Done)
    # Round 2 read the system prompt and tools from the cache that round 1 wrote.
    assert done.usage.cache_write_tokens > 0
    assert done.usage.cache_read_tokens == done.usage.cache_write_tokens


async def test_executor_failure_is_reported_to_the_model(
    fake_anthropic: FakeAnthropic, anthropic_provider: Callable[..., AnthropicProvider]
) -> None:
    too_long = b.FakeToolUse("save_user_fact", {"text": "x" * 200})
    fake_anthropic.script(b.Reply(text="", tool_uses=(too_long,)), b.Reply(text="Sorry."))
    events = await collect(stream_with_tools(anthropic_provider(), REQUEST, FactStore()))

    assert text_of(events) == "Sorry."
    result = fake_anthropic.message_requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "fact too long" in result["content"]


async def test_rounds_are_capped_and_the_last_call_forbids_tools(
    fake_anthropic: FakeAnthropic, anthropic_provider: Callable[..., AnthropicProvider]
) -> None:
    get = b.FakeToolUse("get_user_facts", {})
    fake_anthropic.script(
        *[b.Reply(text="", tool_uses=(get,))] * 2, b.Reply(text="Here is what I know.")
    )
    store = FactStore()
    events = await collect(stream_with_tools(anthropic_provider(), REQUEST, store, max_rounds=2))

    assert len(store.calls) == 2
    assert text_of(events) == "Here is what I know."
    tool_choices = [r["tool_choice"] for r in fake_anthropic.message_requests]
    assert tool_choices == [{"type": "auto"}, {"type": "auto"}, {"type": "none"}]


async def test_model_ignoring_the_cap_ends_with_max_tool_rounds(
    fake_anthropic: FakeAnthropic, anthropic_provider: Callable[..., AnthropicProvider]
) -> None:
    get = b.FakeToolUse("get_user_facts", {})
    fake_anthropic.script(*[b.Reply(text="", tool_uses=(get,))] * 2)
    events = await collect(
        stream_with_tools(anthropic_provider(), REQUEST, FactStore(), max_rounds=1)
    )

    done = events[-1]
    assert isinstance(done, Done) and done.stop_reason == "max_tool_rounds"


async def test_same_loop_works_with_the_openai_provider(
    fake_openai: FakeOpenAI, openai_provider: Callable[..., OpenAICompatibleProvider]
) -> None:
    fake_openai.script(b.Reply(text="", tool_uses=(SAVE,)), b.Reply(text="Saved."))
    store = FactStore()
    events = await collect(stream_with_tools(openai_provider(), REQUEST, store))

    assert store.facts == {"home_city": "The user lives in Lviv."}
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Saved."]
    follow_up = fake_openai.completion_requests[1]["messages"]
    assert follow_up[-1]["role"] == "tool"
    assert follow_up[-2]["tool_calls"][0]["function"]["name"] == "save_user_fact"
