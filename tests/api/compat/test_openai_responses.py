"""The real ``openai`` SDK's Responses API against a live server of the platform
(``/compat/openai/v1/responses``): created, streamed, chained, fetched, deleted."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from tests.api.compat.test_openai_errors import assert_openai_error
from tests.api.compat.test_openai_sdk import client, stored
from tests.durability.helpers import SdkProviders
from tests.factories import make_policy
from tests.fakes.behaviours import HttpError, Reply
from tests.replies.test_pipeline_providers import use_model

pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
ENDING = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


@pytest.fixture
def fake_model(live_url, fake_anthropic, tenant_a):
    """The live server's replies from the fake Anthropic server (requests recorded)."""
    use_model(tenant_a, provider="anthropic")
    runner.provider_factory_set(SdkProviders(anthropic_url=fake_anthropic.url))
    return fake_anthropic


def prompt_of(fake: Any, text: str) -> dict[str, Any]:
    """The last model request whose messages hold ``text``."""
    return next(r for r in reversed(fake.message_requests) if text in json.dumps(r["messages"]))


def texts(prompt: dict[str, Any]) -> list[str]:
    out = []
    for message in prompt["messages"]:
        content = message["content"]
        out += [content] if isinstance(content, str) else [b.get("text", "") for b in content]
    return out


def test_a_chain_of_responses_is_one_conversation_held_by_the_platform(
    live_url, fake_model, key_a, tenant_a
):
    fake_model.script(Reply("Hello Ada."), Reply("Your name is Ada."), Reply("Still Ada."))
    sdk = client(live_url, key_a)

    raw = sdk.responses.with_raw_response.create(
        model="any", input="My name is Ada.", instructions="Be terse.", metadata={"app": "demo"}
    )
    first = raw.parse()
    conversation_id = int(raw.headers["x-conversation-id"])
    assert first.id.startswith("resp_") and first.object == "response"
    assert first.status == "completed" and first.output_text == "Hello Ada."
    assert first.output[0].id.startswith("msg_") and first.output[0].role == "assistant"
    assert first.instructions == "Be terse." and first.metadata == {"app": "demo"}
    assert first.model == "anthropic test" and first.tools == [] and first.store is True
    usage = first.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens >= 0
    extension = first.model_extra["chatplatform"]
    assert extension["conversation_id"] == conversation_id and extension["turn"]
    system = json.dumps(prompt_of(fake_model, "My name is Ada.")["system"])
    platform_part, _, client_part = system.partition("<client_instructions>")
    assert "Be brief." in platform_part and "Be terse." in client_part

    # Chained: the client sends only what is new, the platform's prompt holds the rest.
    events = list(
        sdk.responses.create(
            model="any",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "My name?"}]}],
            previous_response_id=first.id,
            stream=True,
        )
    )
    names = [e.type for e in events]
    deltas = names.count("response.output_text.delta")
    assert deltas >= 2
    assert names == [
        *EVENTS,
        *["response.output_text.delta"] * deltas,
        *ENDING,
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    second = events[-1].response
    assert second.output_text == "Your name is Ada." and second.previous_response_id == first.id
    assert second.usage.output_tokens > 0 and second.instructions is None
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == (
        "Your name is Ada."
    )
    assert {"My name is Ada.", "Hello Ada."} <= set(texts(prompt_of(fake_model, "My name?")))

    with sdk.responses.stream(model="any", input="Again?", previous_response_id=second.id) as s:
        third = s.get_final_response()
    assert third.output_text == "Still Ada."
    earlier = {"My name is Ada.", "Hello Ada.", "My name?", "Your name is Ada."}
    assert earlier <= set(texts(prompt_of(fake_model, "Again?")))

    fetched = sdk.responses.retrieve(second.id)
    assert fetched.id == second.id and fetched.output_text == "Your name is Ada."
    assert fetched.status == "completed" and fetched.previous_response_id == first.id
    assert fetched.usage.total_tokens == second.usage.total_tokens
    rows = stored(tenant_a, conversation_id)
    assert [content for role, content in rows if role == "user"] == [
        "My name is Ada.",
        "My name?",
        "Again?",
    ]
    assert len(rows) == 6

    # The messages are the conversation's, in the REST API like any other.
    listed = httpx.get(
        f"{live_url}/api/v1/conversations/{conversation_id}/messages/",
        headers={"Authorization": f"Bearer {key_a}"},
        timeout=10,
    )
    assert [m["content"] for m in listed.json()["results"]][:2] == ["My name is Ada.", "Hello Ada."]


def test_a_reply_cut_at_length_is_incomplete(live_url, fake_model, key_a):
    fake_model.script(
        Reply("Cut short", stop_reason="max_tokens"), Reply("Cut again", stop_reason="max_tokens")
    )
    sdk = client(live_url, key_a)
    cut = sdk.responses.create(model="m", input="Tell me everything.")
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert cut.output_text == "Cut short"
    names = [e.type for e in sdk.responses.create(model="m", input="More.", stream=True)]
    assert names[-4:] == [*ENDING, "response.incomplete"]


def test_a_provider_failure_is_an_error_and_the_message_stays(
    live_url, fake_model, key_a, tenant_a
):
    refused = HttpError(400, "invalid_request_error", "The provider refused the request.")
    fake_model.script(refused, refused)
    sdk = client(live_url, key_a)
    with pytest.raises(openai.InternalServerError) as caught:
        sdk.responses.create(model="m", input="Hello")
    assert caught.value.status_code == 502
    assert_openai_error({"error": caught.value.body})
    events = list(sdk.responses.create(model="m", input="Streamed", stream=True))
    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.message
    with tenant_scope(tenant_a):
        assert Message.objects.filter(role="user", content__in=["Hello", "Streamed"]).count() == 2
    # The failed response is stored as such.
    assert sdk.responses.retrieve(failed.id).status == "failed"


def test_an_unnamed_history_continues_its_conversation(live_url, key_a, tenant_a):
    sdk = client(live_url, key_a)
    history: list[Any] = [{"role": "user", "content": "My name is Ada."}]
    raw = sdk.responses.with_raw_response.create(model="m", input=history)
    conversation_id = int(raw.headers["x-conversation-id"])
    # The response's output items sent back as input, as the SDK's users do.
    history += [item.model_dump(exclude_none=True) for item in raw.parse().output]
    history += [{"type": "message", "role": "user", "content": "What is my name?"}]
    again = sdk.responses.with_raw_response.create(model="m", input=history)
    assert int(again.headers["x-conversation-id"]) == conversation_id
    assert len(stored(tenant_a, conversation_id)) == 4

    named = sdk.responses.with_raw_response.create(
        model="m", input="Third", metadata={"conversation_id": str(conversation_id)}
    )
    assert int(named.headers["x-conversation-id"]) == conversation_id
    assert len(stored(tenant_a, conversation_id)) == 6


def test_store_false_and_other_users_responses_cannot_be_fetched_or_chained(
    live_url, key_a, key_b, tenant_a
):
    from chatplatform.services import api_key_create
    from tests.factories import make_member

    sdk = client(live_url, key_a)
    unstored = sdk.responses.create(model="m", input="Hi", store=False)
    assert unstored.store is False and unstored.output_text
    kept = sdk.responses.create(model="m", input="Hello")
    colleague = api_key_create(tenant=tenant_a, name="other", user=make_member(tenant_a))[1]
    for key, response_id in [(key_a, unstored.id), (key_b, kept.id), (colleague, kept.id)]:
        other = client(live_url, key)
        with pytest.raises(openai.NotFoundError) as missing:
            other.responses.retrieve(response_id)
        body: Any = missing.value.body
        assert body["message"] == f"Response with id '{response_id}' not found."
        with pytest.raises(openai.BadRequestError) as unchained:
            other.responses.create(model="m", input="Go on", previous_response_id=response_id)
        body = unchained.value.body
        assert body["param"] == "previous_response_id"
        assert body["message"] == (f"Previous response with id '{response_id}' not found.")
    assert sdk.responses.retrieve(kept.id).output_text == kept.output_text
    sdk.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(kept.id)
    with tenant_scope(tenant_a):  # the conversation keeps its messages
        assert Message.objects.filter(content="Hello").exists()


def test_malformed_and_unsupported_bodies_are_400_naming_the_parameter(live_url, key_a):
    # One live server for every body (a server per case would cost seconds each).
    text = {"role": "user", "content": "x"}
    cases: list[tuple[Any, str]] = [
        ({"input": "x"}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": 5}, "input"),
        ({"model": "m", "input": [{"role": "wizard", "content": "x"}]}, "input"),
        ({"model": "m", "input": [{"role": "assistant", "content": "x"}]}, "input"),
        ({"model": "m", "input": [{"type": "function_call", "name": "f"}]}, "input"),
        (
            {
                "model": "m",
                "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}],
            },
            "input",
        ),
        ({"model": "m", "input": [text], "tools": [{"type": "web_search"}]}, "tools"),
        ({"model": "m", "input": "x", "background": True}, "background"),
        ({"model": "m", "input": "x", "conversation": "conv_1"}, "conversation"),
        ({"model": "m", "input": "x", "reasoning": {"effort": "high"}}, "reasoning"),
        ({"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}}, "text"),
        ({"model": "m", "input": "x", "temperature": 7}, "temperature"),
        ({"model": "m", "input": "x", "store": "yes"}, "store"),
        ({"model": "m", "input": "x", "metadata": {"n": 1}}, "metadata"),
        ({"model": "m", "input": "   "}, "content"),
    ]
    headers = {"Authorization": f"Bearer {key_a}"}
    for body, param in cases:
        response = httpx.post(
            f"{live_url}/compat/openai/v1/responses", json=body, headers=headers, timeout=20
        )
        assert response.status_code == 400, (body, response.text)
        assert_openai_error(response.json())
        assert response.json()["error"]["param"] == param, (body, response.json())
    broken = httpx.post(
        f"{live_url}/compat/openai/v1/responses",
        content=b'{"model": "m", "input": [',
        headers={**headers, "Content-Type": "application/json"},
        timeout=20,
    )
    assert broken.status_code == 400
    assert_openai_error(broken.json())
    # Accepted knobs: the policy decides, the body is not refused.
    accepted = httpx.post(
        f"{live_url}/compat/openai/v1/responses",
        json={"model": "m", "input": "x", "temperature": 0.2, "max_output_tokens": 64, "tools": []},
        headers=headers,
        timeout=20,
    )
    assert accepted.status_code == 200 and accepted.json()["status"] == "completed"
    with pytest.raises(openai.BadRequestError) as sdk_refused:
        client(live_url, key_a).responses.create(
            model="m",
            input="x",
            tools=[{"type": "function", "name": "no spaces", "parameters": {}}],
        )
    assert sdk_refused.value.body["param"] == "tools"  # type: ignore[index]


def test_keys_sizes_and_rates_answer_as_the_other_endpoints(live_url, key_a, tenant_a, settings):
    with pytest.raises(openai.AuthenticationError) as wrong:
        client(live_url, key_a + "x").responses.create(model="m", input="Hi")
    assert_openai_error({"error": wrong.value.body}, "invalid_api_key")
    settings.API_MAX_BODY_BYTES = 50_000
    with pytest.raises(openai.APIStatusError) as huge:
        client(live_url, key_a).responses.create(model="m", input="x" * 60_000)
    assert huge.value.status_code == 413
    make_policy(tenant_a, activate=True, user_messages_per_minute=1)
    sdk = client(live_url, key_a)
    sdk.responses.create(model="m", input="Once")
    with pytest.raises(openai.RateLimitError) as limited:
        sdk.responses.create(model="m", input="Twice")
    assert int(limited.value.response.headers["retry-after"]) > 0
