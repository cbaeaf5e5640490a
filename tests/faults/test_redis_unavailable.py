"""The REST API with Redis unreachable (its cache, channel layer and reply coordination all
pointed at a closed port; the shared Redis server is never stopped): reads come from the
database and answer as usual; a send, which needs Redis to count the message and start its
reply, answers 503 ``service_unavailable`` with ``Retry-After`` and stores nothing, and the
same send once Redis is back is accepted once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies.coordination import coordination_reset
from chats.services.messages import message_create
from tests.api.conftest import error_of
from tests.scale.processes import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def redis_unreachable() -> Iterator[None]:
    """Every use of Redis (cache, channel layer, reply coordination) aimed at a port nobody
    listens on, while the block runs."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(
        REDIS_URL=url,
        CACHES={
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": url,
                "OPTIONS": {"socket_timeout": 2, "socket_connect_timeout": 2},
            }
        },
        CHANNEL_LAYERS={
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": [url]},
            }
        },
    ):
        coordination_reset()
        try:
            yield
        finally:
            coordination_reset()


@pytest.fixture
def redis_down() -> Iterator[None]:
    with redis_unreachable():
        yield


@pytest.fixture
def client_a(tenant_a: Any, member_a: Any) -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_key_create(tenant=tenant_a, name='k', user=member_a)[1]}"
    )
    return client


def stored(conversation: Any) -> list[Message]:
    with tenant_scope(conversation.tenant_id):
        return list(Message.objects.filter(conversation_id=conversation.pk).order_by("seq"))


def unavailable(response: Any) -> None:
    error_of(response, 503, "service_unavailable")
    assert int(response["Retry-After"]) > 0


def test_reads_answer_from_the_database(client_a, member_a, conversation_a):
    message = message_create(
        conversation=conversation_a, role="user", content="stored earlier", author=member_a
    )[0]
    base = f"/api/v1/conversations/{conversation_a.pk}"
    session = APIClient()
    session.force_login(member_a)
    for client in (client_a, session):
        with redis_unreachable():
            assert client.get("/api/v1/me/").status_code == 200
            listed = client.get("/api/v1/conversations/")
            assert listed.status_code == 200, listed.content[:500]
            assert [c["id"] for c in listed.json()["results"]] == [conversation_a.pk]
            messages = client.get(f"{base}/messages/")
            assert messages.status_code == 200, messages.content[:500]
            assert [m["content"] for m in messages.json()["results"]] == ["stored earlier"]
            one = client.get(f"{base}/messages/{message.pk}/")
            assert one.status_code == 200 and one.json()["id"] == message.pk


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
def test_a_send_is_503_and_stores_nothing(accept, client_a, conversation_a, redis_down):
    url = f"/api/v1/conversations/{conversation_a.pk}/messages/"
    body = {"content": "Are you there?", "client_id": "down-1"}
    unavailable(client_a.post(url, body, format="json", HTTP_ACCEPT=accept))
    assert stored(conversation_a) == []


def test_the_same_send_once_redis_is_back_is_accepted_once(client_a, conversation_a):
    url = f"/api/v1/conversations/{conversation_a.pk}/messages/"
    body = {"content": "Are you there?", "client_id": "down-2"}
    with redis_unreachable():
        unavailable(client_a.post(url, body, format="json"))
    coordination_reset()
    accepted = client_a.post(url, body, format="json")
    assert accepted.status_code == 201, accepted.content[:500]
    assert accepted.json()["duplicate"] is False
    assert [m.content for m in stored(conversation_a) if m.role == "user"] == ["Are you there?"]


def test_a_retried_send_of_a_stored_message_is_503_and_adds_nothing(
    client_a, member_a, conversation_a
):
    message_create(
        conversation=conversation_a,
        role="user",
        content="sent before",
        author=member_a,
        client_id="down-3",
    )
    url = f"/api/v1/conversations/{conversation_a.pk}/messages/"
    with redis_unreachable():
        unavailable(
            client_a.post(url, {"content": "sent before", "client_id": "down-3"}, format="json")
        )
    assert [m.content for m in stored(conversation_a)] == ["sent before"]
