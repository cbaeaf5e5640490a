"""The ``openai`` SDK's errors from the SDK-compatible API: each in OpenAI's shape and status,
never an HTML page; nothing of another tenant reachable."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from chatplatform.core.llm.errors import InvalidRequest
from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.services import conversation_create
from tests.api.compat.test_openai_sdk import client
from tests.factories import make_policy

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = [{"role": "user", "content": "Hello"}]


def assert_openai_error(body: Any, code: str | None = None) -> None:
    error = body["error"]
    assert set(error) == {"message", "type", "code", "param"}
    assert error["message"] and error["type"]
    if code is not None:
        assert error["code"] == code


def test_a_wrong_key_is_401(live_url, key_a):
    with pytest.raises(openai.AuthenticationError) as caught:
        client(live_url, key_a + "x").chat.completions.create(model="m", messages=HELLO)
    assert caught.value.status_code == 401
    assert_openai_error(caught.value.body and {"error": caught.value.body}, "invalid_api_key")
    missing = httpx.post(
        f"{live_url}/compat/openai/v1/chat/completions", json={"model": "m", "messages": HELLO}
    )
    assert missing.status_code == 401
    assert_openai_error(missing.json(), "invalid_api_key")


def test_another_tenants_conversation_is_404_and_untouched(live_url, key_a, tenant_b, member_b):
    theirs = conversation_create(tenant=tenant_b, created_by=member_b, title="private")
    with pytest.raises(openai.NotFoundError) as caught:
        client(live_url, key_a).chat.completions.create(
            model="m", messages=HELLO, extra_headers={"X-Conversation-Id": str(theirs.pk)}
        )
    assert caught.value.status_code == 404
    with pytest.raises(openai.NotFoundError):
        client(live_url, key_a).chat.completions.create(
            model="m", messages=HELLO, metadata={"conversation_id": str(theirs.pk)}
        )
    with pytest.raises(openai.NotFoundError):
        client(live_url, key_a).chat.completions.create(
            model="m", messages=HELLO, extra_headers={"X-Conversation-Id": "not-an-id"}
        )
    with tenant_scope(tenant_b):
        assert not Message.objects.filter(conversation_id=theirs.pk).exists()


def test_another_users_history_is_not_continued(live_url, key_a, tenant_a):
    from chatplatform.services import api_key_create
    from tests.factories import make_member

    other = api_key_create(tenant=tenant_a, name="other", user=make_member(tenant_a))[1]
    first = client(live_url, key_a).chat.completions.with_raw_response.create(
        model="m", messages=HELLO
    )
    reply = first.parse().choices[0].message.content
    resent = [*HELLO, {"role": "assistant", "content": reply}, {"role": "user", "content": "Hi"}]
    second = client(live_url, other).chat.completions.with_raw_response.create(
        model="m", messages=resent
    )
    assert second.headers["x-conversation-id"] != first.headers["x-conversation-id"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"messages": HELLO}, "model"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages"),
        ({"model": "m", "messages": [{"role": "assistant", "content": "x"}]}, "messages"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages"),
        ({"model": "m", "messages": HELLO, "tools": [{"type": "function"}]}, "tools"),
        ({"model": "m", "messages": HELLO, "n": 3}, "n"),
        ({"model": "m", "messages": [{"role": "user", "content": "   "}]}, "content"),
    ],
)
def test_a_malformed_body_is_400_naming_the_parameter(live_url, key_a, body, param):
    response = httpx.post(
        f"{live_url}/compat/openai/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key_a}"},
        timeout=20,
    )
    assert response.status_code == 400, response.text
    assert_openai_error(response.json())
    assert response.json()["error"]["param"] == param


def test_a_body_that_is_not_json_is_400_in_openais_shape(live_url, key_a):
    response = httpx.post(
        f"{live_url}/compat/openai/v1/chat/completions",
        content=b'{"model": "m", "messages": [',
        headers={"Authorization": f"Bearer {key_a}", "Content-Type": "application/json"},
        timeout=20,
    )
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/json")
    assert_openai_error(response.json())


def test_a_huge_body_is_413_before_it_is_read(live_url, key_a, settings):
    settings.API_MAX_BODY_BYTES = 50_000
    text = "x" * 60_000
    with pytest.raises(openai.APIStatusError) as caught:
        client(live_url, key_a).chat.completions.create(
            model="m", messages=[{"role": "user", "content": text}]
        )
    assert caught.value.status_code == 413
    assert_openai_error({"error": caught.value.body}, "too_large")


def test_an_earlier_turn_too_long_is_413_and_nothing_is_stored(live_url, key_a, tenant_a):
    make_policy(tenant_a, activate=True, max_message_chars=100)
    with pytest.raises(openai.APIStatusError) as caught:
        client(live_url, key_a).chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "x" * 101},
                {"role": "assistant", "content": "Long."},
                {"role": "user", "content": "Short"},
            ],
        )
    assert caught.value.status_code == 413
    assert_openai_error({"error": caught.value.body}, "too_large")
    with tenant_scope(tenant_a):
        assert not Message.objects.exists()


def test_the_send_rate_is_429_with_retry_after(live_url, key_a, tenant_a):
    make_policy(tenant_a, activate=True, user_messages_per_minute=1)
    sdk = client(live_url, key_a)
    sdk.chat.completions.create(model="m", messages=HELLO)
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "Again"}])
    assert int(caught.value.response.headers["retry-after"]) > 0
    assert_openai_error({"error": caught.value.body})


def test_a_provider_failure_is_502_and_the_message_stays(live_url, key_a, tenant_a):
    class Refusing(OfflineProvider):
        async def stream(self, request):  # type: ignore[override]
            nothing: tuple[Any, ...] = ()
            for event in nothing:  # an async generator that yields nothing
                yield event
            raise InvalidRequest("The provider refused the request.")

    runner.provider_factory_set(lambda prepared: Refusing())
    with pytest.raises(openai.InternalServerError) as caught:
        client(live_url, key_a).chat.completions.create(model="m", messages=HELLO)
    assert caught.value.status_code == 502
    assert_openai_error({"error": caught.value.body})
    with tenant_scope(tenant_a):
        assert Message.objects.filter(role="user", content="Hello").exists()

    with pytest.raises(openai.APIError) as streamed:
        list(
            client(live_url, key_a).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Streamed"}], stream=True
            )
        )
    assert "provider" in str(streamed.value)


def test_unknown_paths_and_methods_answer_json(live_url, key_a):
    headers = {"Authorization": f"Bearer {key_a}"}
    unknown = httpx.get(f"{live_url}/compat/openai/v1/assistants", headers=headers)
    assert unknown.status_code == 404
    assert_openai_error(unknown.json())
    wrong = httpx.get(f"{live_url}/compat/openai/v1/chat/completions", headers=headers)
    assert wrong.status_code == 405
    assert_openai_error(wrong.json())
