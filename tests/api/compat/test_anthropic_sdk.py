"""The real ``anthropic`` SDK against a live server of the platform
(``/compat/anthropic/v1``)."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from tests.api.compat.test_openai_sdk import history, stored
from tests.factories import make_policy

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = [{"role": "user", "content": "Hello"}]


def sdk_for(url: str, key: str, **options: Any) -> Any:
    """The SDK with its base URL at the prefix (the SDK adds ``/v1/messages``)."""
    return anthropic.Anthropic(
        base_url=f"{url}/compat/anthropic", api_key=key, max_retries=0, **options
    )


def test_a_message_is_stored_and_answered(live_url, key_a, tenant_a):
    raw = sdk_for(live_url, key_a).messages.with_raw_response.create(
        model="any", max_tokens=256, system="Be brief.", messages=HELLO
    )
    done = raw.parse()
    conversation_id = int(raw.headers["x-conversation-id"])
    assert done.type == "message" and done.role == "assistant" and done.id.startswith("msg_")
    assert done.stop_reason == "end_turn"
    text = done.content[0].text
    assert stored(tenant_a, conversation_id) == [("user", "Hello"), ("assistant", text)]
    usage = done.usage
    assert usage.output_tokens > 0
    assert usage.input_tokens + usage.cache_read_input_tokens > 0
    assert usage.cache_creation_input_tokens is not None
    extension = done.model_extra["chatplatform"]
    assert extension["conversation_id"] == conversation_id and extension["turn"]


def test_a_streamed_message_has_the_apis_event_sequence(live_url, key_a, tenant_a):
    sdk = sdk_for(live_url, key_a)
    with sdk.messages.stream(model="any", max_tokens=256, messages=HELLO) as stream:
        events = list(stream)
        final = stream.get_final_message()
    names = [e.type for e in events]
    assert names[:2] == ["message_start", "content_block_start"]  # (the SDK drops pings)
    raw_names = [n for n in names if n not in ("text",)]
    assert raw_names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert names.count("content_block_delta") >= 2
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0
    text = final.content[0].text
    conversation_id = next(e for e in events if e.type == "message_delta").model_extra[
        "chatplatform"
    ]["conversation_id"]
    assert stored(tenant_a, conversation_id) == [("user", "Hello"), ("assistant", text)]


def test_the_raw_stream_is_the_exact_event_sequence(live_url, key_a):
    with httpx.stream(
        "POST",
        f"{live_url}/compat/anthropic/v1/messages",
        json={"model": "m", "max_tokens": 64, "messages": HELLO, "stream": True},
        headers={"x-api-key": key_a, "anthropic-version": "2023-06-01"},
        timeout=30,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        names = [
            line.removeprefix("event: ")
            for line in response.iter_lines()
            if line.startswith("event: ")
        ]
    deltas = names.count("content_block_delta")
    assert deltas >= 2
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_an_unnamed_history_resent_whole_stores_only_what_is_new(live_url, key_a, tenant_a):
    sdk = sdk_for(live_url, key_a)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "My name is Ada."}]
    first = sdk.messages.with_raw_response.create(model="m", max_tokens=64, messages=messages)
    conversation_id = int(first.headers["x-conversation-id"])
    messages += [
        {"role": "assistant", "content": first.parse().content[0].text},
        {"role": "user", "content": [{"type": "text", "text": "What is my name?"}]},
    ]
    second = sdk.messages.with_raw_response.create(model="m", max_tokens=64, messages=messages)
    assert int(second.headers["x-conversation-id"]) == conversation_id
    assert len(stored(tenant_a, conversation_id)) == 4


def test_a_named_conversation_and_another_tenants(live_url, key_a, tenant_a, member_a, tenant_b):
    from tests.factories import make_member

    mine = conversation_create(tenant=tenant_a, created_by=member_a, title="named")
    sdk = sdk_for(live_url, key_a)
    sdk.messages.create(
        model="m",
        max_tokens=64,
        messages=HELLO,
        extra_headers={"X-Conversation-Id": str(mine.pk)},
    )
    assert [r[0] for r in stored(tenant_a, mine.pk)] == ["user", "assistant"]
    theirs = conversation_create(tenant=tenant_b, created_by=make_member(tenant_b), title="x")
    with pytest.raises(anthropic.NotFoundError) as caught:
        sdk.messages.create(
            model="m",
            max_tokens=64,
            messages=HELLO,
            extra_headers={"X-Conversation-Id": str(theirs.pk)},
        )
    body: Any = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    with tenant_scope(tenant_b):
        assert not Message.objects.filter(conversation_id=theirs.pk).exists()


def test_count_tokens_is_the_managed_prompt_and_stores_nothing(live_url, key_a, tenant_a):
    make_policy(
        tenant_a,
        activate=True,
        max_context_tokens=6000,
        reserved_response_tokens=1000,
        system_budget=1000,
        facts_budget=300,
        summaries_budget=600,
        retrieval_budget=1000,
    )
    sdk = sdk_for(live_url, key_a, timeout=120)
    short = sdk.messages.count_tokens(model="m", messages=HELLO).input_tokens
    long = [*history(2000), {"role": "user", "content": "Which kite was number 7?"}]
    managed = sdk.messages.count_tokens(model="m", messages=long).input_tokens
    assert 0 < short < managed <= 5000
    with tenant_scope(tenant_a):
        assert not Message.objects.exists()


def test_errors_come_in_anthropics_shape(live_url, key_a, settings):
    sdk = sdk_for(live_url, key_a)
    with pytest.raises(anthropic.AuthenticationError) as wrong:
        sdk_for(live_url, key_a + "x").messages.create(model="m", max_tokens=8, messages=HELLO)
    assert wrong.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "Invalid or revoked API key."},
    }
    with pytest.raises(anthropic.BadRequestError) as malformed:
        sdk.messages.create(model="m", max_tokens=8, messages=[])
    assert malformed.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    no_max = httpx.post(
        f"{live_url}/compat/anthropic/v1/messages",
        json={"model": "m", "messages": HELLO},
        headers={"x-api-key": key_a},
    )
    assert no_max.status_code == 400 and no_max.json()["type"] == "error"
    settings.API_MAX_BODY_BYTES = 50_000
    with pytest.raises(anthropic.APIStatusError) as huge:
        sdk.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "x" * 60_000}]
        )
    assert huge.value.status_code == 413
    assert huge.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    unknown = httpx.get(f"{live_url}/compat/anthropic/v1/models", headers={"x-api-key": key_a})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
