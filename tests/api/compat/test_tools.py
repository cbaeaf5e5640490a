"""Tools the client defines and runs, through the real ``openai`` and ``anthropic`` SDKs: the
model's call comes back in each protocol's shape (streamed and not), the client's results
go in as its next message, and the round is stored, paired and shown like any turn. Results
that do not answer exactly the calls of the reply before them are refused (400 in the
protocol's shape, nothing stored), in a resent history as in a named conversation."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.api.compat.transcript import hash_chain, merged, tool_turn
from chats.replies import runner
from tests.api.compat.test_anthropic_sdk import sdk_for
from tests.api.compat.test_openai_sdk import client
from tests.durability.helpers import SdkProviders
from tests.fakes import behaviours as b
from tests.replies.test_pipeline_providers import use_model

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


# --- Results that do not answer their round's calls exactly ------------------------------

PARALLEL = [
    {"id": "call_lis", "city": "Lisbon"},
    {"id": "call_opo", "city": "Porto"},
]
#: Results (call id, content) that do not answer exactly the two parallel calls above: one
#: call unanswered, a result for a call no reply made, one call answered twice.
UNPAIRED_RESULTS = {
    "one_call_unanswered": [("call_lis", "sunny")],
    "an_unknown_id": [("call_lis", "sunny"), ("call_xyz", "rain")],
    "one_call_answered_twice": [("call_lis", "sunny"), ("call_opo", "mild"), ("call_opo", "hot")],
}


def openai_history(results: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A whole history an application resends: a reply with two parallel calls, the results
    it sent, the answer, and a new question."""
    return [
        {"role": "user", "content": "The weather in Lisbon and Porto?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": json.dumps({"city": c["city"]}),
                    },
                }
                for c in PARALLEL
            ],
        },
        *({"role": "tool", "tool_call_id": i, "content": text} for i, text in results),
        {"role": "assistant", "content": "Sunny in Lisbon."},
        {"role": "user", "content": "And tomorrow?"},
    ]


def anthropic_history(results: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "The weather in Lisbon and Porto?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": c["id"],
                    "name": "get_weather",
                    "input": {"city": c["city"]},
                }
                for c in PARALLEL
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": i, "content": text} for i, text in results
            ],
        },
        {"role": "assistant", "content": "Sunny in Lisbon."},
        {"role": "user", "content": "And tomorrow?"},
    ]


def message_count(tenant: Any) -> int:
    with tenant_scope(tenant):
        return Message.objects.count()


@pytest.mark.parametrize("case", sorted(UNPAIRED_RESULTS))
def test_openai_resent_history_with_unpaired_results_is_refused(live_url, key_a, tenant_a, case):
    sdk = client(live_url, key_a)
    with pytest.raises(openai.BadRequestError) as raised:
        sdk.chat.completions.create(
            model="any", messages=openai_history(UNPAIRED_RESULTS[case]), tools=[WEATHER]
        )
    error = raised.value.body
    assert error["type"] == "invalid_request_error" and error["param"] == "messages"  # type: ignore[index]
    assert "answer every call" in error["message"]  # type: ignore[index]
    assert message_count(tenant_a) == 0  # no conversation, no message


@pytest.mark.parametrize("case", sorted(UNPAIRED_RESULTS))
def test_anthropic_resent_history_with_unpaired_results_is_refused(live_url, key_a, tenant_a, case):
    sdk = sdk_for(live_url, key_a)
    with pytest.raises(anthropic.BadRequestError) as raised:
        sdk.messages.create(
            model="any",
            max_tokens=256,
            messages=anthropic_history(UNPAIRED_RESULTS[case]),
            tools=[WEATHER_ANTHROPIC],
        )
    assert raised.value.body["type"] == "error"  # type: ignore[index]
    assert raised.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert message_count(tenant_a) == 0


def test_results_of_an_earlier_round_after_other_turns_are_refused(live_url, key_a, tenant_a):
    """Results answer the reply right before them: not a round further back."""
    history = openai_history([("call_lis", "sunny"), ("call_opo", "mild")])
    history.insert(-1, {"role": "tool", "tool_call_id": "call_lis", "content": "again"})
    history.insert(-2, {"role": "user", "content": "Thanks."})
    with pytest.raises(openai.BadRequestError):
        client(live_url, key_a).chat.completions.create(model="any", messages=history)
    assert message_count(tenant_a) == 0


def test_resent_parallel_results_in_any_order_go_to_the_provider_paired(
    live_url, key_a, tenant_a, fake_anthropic
):
    use_model(tenant_a, provider="anthropic")
    runner.provider_factory_set(SdkProviders(anthropic_url=fake_anthropic.url))
    fake_anthropic.default_reply = b.Reply("Rain tomorrow.")
    raw = client(live_url, key_a).chat.completions.with_raw_response.create(
        model="any", messages=openai_history([("call_opo", "mild"), ("call_lis", "sunny")])
    )
    assert raw.parse().choices[0].message.content == "Rain tomorrow."
    stored = rows(tenant_a, int(raw.headers["x-conversation-id"]))
    assert [m.role for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert stored[1].tool_group == stored[2].tool_group == "call_lis"
    (sent,) = fake_anthropic.message_requests  # the fake refuses unpaired blocks
    assert stored[1].content == ""  # the calls are the reply's content, no placeholder text
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use", "tool_use"]
    uses = [b["id"] for b in sent["messages"][1]["content"]]
    answered = [b["tool_use_id"] for b in sent["messages"][2]["content"]]
    assert uses == ["call_lis", "call_opo"] and sorted(answered) == uses


def test_named_results_answering_a_call_twice_are_refused(live_url, key_a, tenant_a):
    sdk = client(live_url, key_a)
    raw = sdk.chat.completions.with_raw_response.create(
        model="any", messages=[{"role": "user", "content": ASK}], tools=[WEATHER]
    )
    (call,) = raw.parse().choices[0].message.tool_calls
    conversation_id = raw.headers["x-conversation-id"]
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(
            model="any",
            messages=[
                {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
                {"role": "tool", "tool_call_id": call.id, "content": "sunny again"},
            ],
            extra_headers={"X-Conversation-Id": conversation_id},
        )
    assert [m.role for m in rows(tenant_a, int(conversation_id))] == ["user", "assistant"]


def test_named_results_for_a_round_already_answered_are_refused(live_url, key_a, tenant_a):
    sdk = client(live_url, key_a)
    raw = sdk.chat.completions.with_raw_response.create(
        model="any", messages=[{"role": "user", "content": ASK}], tools=[WEATHER]
    )
    (call,) = raw.parse().choices[0].message.tool_calls
    conversation_id = raw.headers["x-conversation-id"]
    results = [{"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    headers = {"X-Conversation-Id": conversation_id}
    sdk.chat.completions.create(model="any", messages=results, extra_headers=headers)
    stored = [m.role for m in rows(tenant_a, int(conversation_id))]
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model="any", messages=results, extra_headers=headers)
    assert [m.role for m in rows(tenant_a, int(conversation_id))] == stored
