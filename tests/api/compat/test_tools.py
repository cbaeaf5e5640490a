"""Tools the client defines and runs, through the real ``openai`` and ``anthropic`` SDKs: the
model's call comes back in each protocol's shape (streamed and not), the client's results
go in as its next message, and the round is stored, paired and shown like any turn."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.api.compat.transcript import hash_chain, merged, tool_turn
from tests.api.compat.test_anthropic_sdk import sdk_for
from tests.api.compat.test_openai_sdk import client

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WEATHER_ANTHROPIC = {
    "name": "get_weather",
    "description": "The weather in a city now.",
    "input_schema": WEATHER["function"]["parameters"],
}
ASK = "Please use get_weather for Lisbon."


def rows(tenant: Any, conversation_id: int) -> list[Message]:
    with tenant_scope(tenant):
        return list(Message.objects.filter(conversation_id=conversation_id).order_by("seq"))


def test_openai_a_call_goes_to_the_client_and_its_result_is_answered(live_url, key_a, tenant_a):
    sdk = client(live_url, key_a)
    messages: list[Any] = [{"role": "user", "content": ASK}]
    raw = sdk.chat.completions.with_raw_response.create(
        model="any", messages=messages, tools=[WEATHER]
    )
    first = raw.parse()
    conversation_id = int(raw.headers["x-conversation-id"])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": ASK}
    # The client runs the tool and sends its history with the call and the result (unnamed:
    # the platform finds the conversation by the history it starts with).
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"celsius": 21}'},
    ]
    second = sdk.chat.completions.with_raw_response.create(
        model="any", messages=messages, tools=[WEATHER]
    )
    assert int(second.headers["x-conversation-id"]) == conversation_id
    answer = second.parse().choices[0]
    assert answer.finish_reason == "stop"
    assert 'The tool answered: {"celsius": 21}' in answer.message.content
    stored = rows(tenant_a, conversation_id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls == [{"id": call.id, "name": "get_weather", "input": {"city": ASK}}]
    assert stored[2].tool_results == [
        {"tool_use_id": call.id, "content": '{"celsius": 21}', "is_error": False}
    ]
    assert stored[1].tool_group == stored[2].tool_group == call.id
    assert stored[3].answers_id == stored[2].pk
    # The offer is kept with the message that made it.
    assert (stored[0].offered_tools or {})["tools"][0]["name"] == "get_weather"


def test_openai_streamed_call_and_named_conversation(live_url, key_a, tenant_a):
    sdk = client(live_url, key_a)
    chunks = list(
        sdk.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "What is the weather? use GET_WEATHER"}],
            tools=[WEATHER],
            stream=True,
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [call for d in deltas for call in (d.tool_calls or [])]
    assert [c.function.name for c in calls] == ["get_weather"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    conversation_id = chunks[-1].model_extra["chatplatform"]["conversation_id"]
    # Named: only the result is sent.
    answer = sdk.chat.completions.create(
        model="any",
        messages=[{"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"}],
        extra_headers={"X-Conversation-Id": str(conversation_id)},
    )
    assert "The tool answered: sunny" in answer.choices[0].message.content
    assert [m.role for m in rows(tenant_a, conversation_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_openai_forced_tool_and_bad_tool_input(live_url, key_a):
    sdk = client(live_url, key_a)
    forced = sdk.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": "Hello"}],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    assert forced.choices[0].message.tool_calls[0].function.name == "get_weather"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
        ),
        ({"tools": [{"type": "function", "function": {"name": "save_user_fact"}}]}, "tools"),
    ]
    for bad, param in cases:
        with pytest.raises(openai.BadRequestError) as raised:
            sdk.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "Hi"}], **bad
            )
        assert raised.value.body["param"] == param  # type: ignore[index]
    # A result answering a call no reply made is refused, nothing stored.
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(
            model="any",
            messages=[
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "tool", "tool_call_id": "call_unknown", "content": "x"},
            ],
        )


def test_anthropic_a_call_and_its_result_streamed_and_not(live_url, key_a, tenant_a):
    sdk = sdk_for(live_url, key_a)
    messages: list[Any] = [{"role": "user", "content": ASK}]
    raw = sdk.messages.with_raw_response.create(
        model="any", max_tokens=256, messages=messages, tools=[WEATHER_ANTHROPIC]
    )
    first = raw.parse()
    conversation_id = int(raw.headers["x-conversation-id"])
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"city": ASK}
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "cloudy"}],
        },
    ]
    with sdk.messages.stream(
        model="any", max_tokens=256, messages=messages, tools=[WEATHER_ANTHROPIC]
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "end_turn"
    assert "The tool answered: cloudy" in final.content[0].text
    stored = rows(tenant_a, conversation_id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].tool_group == use.id


def test_anthropic_streamed_tool_use_blocks(live_url, key_a):
    sdk = sdk_for(live_url, key_a)
    with sdk.messages.stream(
        model="any",
        max_tokens=256,
        messages=[{"role": "user", "content": "Hello"}],
        tools=[WEATHER_ANTHROPIC],
        tool_choice={"type": "any"},
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    use = final.content[-1]
    assert use.type == "tool_use" and use.input == {"city": "Hello"}
    starts = [e for e in events if e.type == "content_block_start"]
    assert [s.content_block.type for s in starts] == ["text", "tool_use"]
    with pytest.raises(Exception, match="server tools"):
        sdk.messages.create(
            model="any",
            max_tokens=256,
            messages=[{"role": "user", "content": "Hi"}],
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )


def test_a_tool_round_hashes_and_merges_as_one_turn_each():
    results = [{"tool_use_id": "a", "content": "1", "is_error": False}]
    more = [{"tool_use_id": "b", "content": "2", "is_error": False}]
    turns = merged([tool_turn("tool", "", results), tool_turn("tool", "", more)])
    assert turns == [tool_turn("tool", "", results + more)]
    assert turns[0][1] == "1\n\n2"
    plain = hash_chain([("user", "x")])
    assert hash_chain([("user", "x"), tool_turn("tool", "", results)])[0] == plain[0]
    assert hash_chain([tool_turn("tool", "", results)]) != hash_chain([tool_turn("tool", "", more)])


RESPONSES_WEATHER = {"type": "function", **WEATHER["function"]}


def test_responses_a_function_call_and_its_output_by_previous_response_id(
    live_url, key_a, tenant_a
):
    sdk = client(live_url, key_a)
    first = sdk.responses.create(model="any", input=ASK, tools=[RESPONSES_WEATHER])
    calls = [item for item in first.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
    assert json.loads(calls[0].arguments) == {"city": ASK}
    second = sdk.responses.create(
        model="any",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "mild"}],
        tools=[RESPONSES_WEATHER],
    )
    assert "The tool answered: mild" in second.output_text
    conversation_id = second.model_extra["chatplatform"]["conversation_id"]
    stored = rows(tenant_a, conversation_id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    # Fetched again, the first response still shows its call.
    again = sdk.responses.retrieve(first.id)
    assert [i.type for i in again.output] == ["message", "function_call"]


def test_responses_streamed_function_call_events(live_url, key_a):
    sdk = client(live_url, key_a)
    events = list(
        sdk.responses.create(
            model="any",
            input="Hello",
            tools=[RESPONSES_WEATHER],
            tool_choice="required",
            stream=True,
        )
    )
    names = [e.type for e in events]
    assert "response.function_call_arguments.done" in names
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments) == {"city": "Hello"}
    final = events[-1]
    assert final.type == "response.completed"
    assert [i.type for i in final.response.output] == ["message", "function_call"]
    with pytest.raises(openai.BadRequestError):
        sdk.responses.create(model="any", input="Hi", tools=[{"type": "web_search"}])


def test_count_tokens_counts_the_tools_offered(live_url, key_a):
    sdk = sdk_for(live_url, key_a)
    hello = [{"role": "user", "content": "Hello"}]
    bare = sdk.messages.count_tokens(model="any", messages=hello).input_tokens
    with_tools = sdk.messages.count_tokens(
        model="any", messages=hello, tools=[WEATHER_ANTHROPIC]
    ).input_tokens
    assert with_tools > bare + 10
