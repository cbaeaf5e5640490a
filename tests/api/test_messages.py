"""Messages: list by seq, read one, send one and get the reply as JSON or as server-sent
events; idempotency, validation, size and rate limits; cross-tenant access is 404.

Sending runs the reply pipeline on other threads (their own database connections), so these
tests commit (``transaction=True``)."""

from __future__ import annotations

import threading
import time

import pytest
from asgiref.sync import async_to_sync

from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.replies.coordination import coordination
from tests.api.conftest import API, error_of
from tests.api.helpers import add_message
from tests.api.sse import parse_events

pytestmark = pytest.mark.django_db(transaction=True)


def url(conversation) -> str:
    return f"{API}/conversations/{conversation.pk}/messages/"


def rows(conversation) -> list[tuple[str, str, str | None]]:
    with tenant_scope(conversation.tenant_id):
        return list(
            Message.objects.filter(conversation_id=conversation.pk)
            .order_by("seq")
            .values_list("role", "status", "client_id")
        )


def test_send_waits_for_the_reply(client_a, conversation_a):
    response = client_a.post(url(conversation_a), {"content": "Hello there"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["duplicate"] is False
    assert body["message"]["content"] == "Hello there" and body["message"]["seq"] == 1
    reply = body["reply"]
    assert reply["status"] == "complete" and reply["answers"] == body["message"]["id"]
    assert "offline" in reply["content"].lower() and reply["token_count"] > 0
    assert rows(conversation_a) == [("user", "complete", None), ("assistant", "complete", None)]


def test_a_retried_send_returns_the_first_result_and_creates_nothing(client_a, conversation_a):
    first = client_a.post(
        url(conversation_a), {"content": "Once"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    assert first.status_code == 201
    again = client_a.post(
        url(conversation_a), {"content": "Once"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["message"] == first.json()["message"]
    assert again.json()["reply"]["id"] == first.json()["reply"]["id"]
    by_body = client_a.post(
        url(conversation_a), {"content": "Once", "client_id": "k-1"}, format="json"
    )
    assert (
        by_body.status_code == 200
        and by_body.json()["message"]["id"] == (first.json()["message"]["id"])
    )
    assert rows(conversation_a) == [("user", "complete", "k-1"), ("assistant", "complete", None)]


@pytest.mark.postgres
def test_concurrent_retries_create_one_message(key_a, conversation_a):
    from django.db import connection

    from tests.api.conftest import key_client

    barrier = threading.Barrier(4)
    statuses: list[int] = []

    def send() -> None:
        client = key_client(key_a)
        barrier.wait()
        response = client.post(
            url(conversation_a), {"content": "Once!"}, format="json", HTTP_IDEMPOTENCY_KEY="race"
        )
        statuses.append(response.status_code)
        connection.close()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses) == [200, 200, 200, 201]
    assert rows(conversation_a) == [("user", "complete", "race"), ("assistant", "complete", None)]


def test_idempotency_key_must_be_sane(client_a, conversation_a):
    response = client_a.post(
        url(conversation_a), {"content": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 65
    )
    assert "Idempotency-Key" in error_of(response, 400, "invalid")["fields"]
    response = client_a.post(
        url(conversation_a),
        {"content": "x", "client_id": "a"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="b",
    )
    assert list(error_of(response, 400, "invalid")["fields"]) == ["client_id"]
    assert rows(conversation_a) == []


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        ("   ", 400, "empty"),
        ("", 400, "empty"),
        ("nul\x00byte", 400, "invalid"),
        ("x" * (64 * 1024 + 1), 413, "too_large"),
    ],
)
def test_rejected_messages_store_nothing(client_a, conversation_a, content, status, code):
    response = client_a.post(url(conversation_a), {"content": content}, format="json")
    error = error_of(response, status)
    assert error["code"] == code or (code == "invalid" and error["code"] == "invalid")
    assert "content" in error["fields"]
    assert rows(conversation_a) == []


def test_no_policy_lifts_the_servers_message_size_ceiling(client_a, conversation_a, tenant_a):
    # A policy allowing 1 MiB (stored before the ceiling was checked, or the operator lowered
    # CHAT_MAX_MESSAGE_CHARS since): the server's 65,536 characters still apply.
    with tenant_scope(tenant_a):
        policy = ContextPolicy.objects.get(pk=tenant_a.active_policy_id)
        policy.pk = None
        policy.tenant = tenant_a
        policy.name = "Roomy"
        policy.save()
        ContextPolicy.objects.filter(pk=policy.pk).update(max_message_chars=1024 * 1024)
    tenant_a.active_policy = policy
    tenant_a.save(update_fields=["active_policy"])
    response = client_a.post(url(conversation_a), {"content": "x" * 900_000}, format="json")
    error = error_of(response, 413, "too_large")
    assert "the limit is 65,536" in error["message"]
    assert rows(conversation_a) == []


def test_bad_bodies_and_reply_to(client_a, conversation_a, conversation_b, member_b):
    error_of(client_a.post(url(conversation_a), {}, format="json"), 400, "invalid")
    error_of(client_a.post(url(conversation_a), {"content": 5}, format="json"), 400, "invalid")
    theirs = add_message(conversation_b, member_b, "not yours")
    response = client_a.post(
        url(conversation_a), {"content": "quote", "reply_to": theirs.pk}, format="json"
    )
    assert list(error_of(response, 400, "invalid")["fields"]) == ["reply_to"]
    assert rows(conversation_a) == []


def test_the_policys_message_rate_applies(client_a, conversation_a, tenant_a):
    with tenant_scope(tenant_a):
        policy = ContextPolicy.objects.get(pk=tenant_a.active_policy_id)
        policy.pk = None
        policy.tenant = tenant_a
        policy.name = "Slow"
        policy.user_messages_per_minute = 2
        policy.save()
    tenant_a.active_policy = policy
    tenant_a.save(update_fields=["active_policy"])
    statuses = [
        client_a.post(url(conversation_a), {"content": f"m{i}"}, format="json").status_code
        for i in range(3)
    ]
    assert set(statuses) <= {201, 429} and statuses[-1] == 429
    response = client_a.post(url(conversation_a), {"content": "again"}, format="json")
    error = error_of(response, 429, "rate_limited")
    assert "2 per minute" in error["message"]
    assert response["Retry-After"] == "60"


def test_202_when_another_runner_holds_the_conversation(client_a, conversation_a, settings):
    settings.API_REPLY_WAIT_SECONDS = 0.3
    lock = f"replies:t{conversation_a.tenant_id}:c{conversation_a.pk}"
    token = async_to_sync(coordination().acquire)(lock)
    assert token
    response = client_a.post(url(conversation_a), {"content": "Anyone?"}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["reply"] is None and body["duplicate"] is False
    message_id = body["message"]["id"]
    assert client_a.get(f"{url(conversation_a)}{message_id}/").json()["role"] == "user"
    # The runner that holds the lock answers it later; the reply is then readable by id.
    async_to_sync(coordination().release)(lock, token)
    async_to_sync(runner.replies_run)(conversation_a.tenant_id, conversation_a.pk)
    with tenant_scope(conversation_a.tenant_id):
        reply = Message.objects.get(answers_id=message_id)
    detail = client_a.get(f"{url(conversation_a)}{reply.pk}/").json()
    assert detail["status"] == "complete" and detail["answers"] == message_id


def test_waits_for_a_reply_another_runner_produces(client_a, conversation_a, settings):
    settings.API_REPLY_WAIT_SECONDS = 20
    tenant_id = conversation_a.tenant_id
    lock = f"replies:t{tenant_id}:c{conversation_a.pk}"
    hub = coordination()
    token = async_to_sync(hub.acquire)(lock)

    def other_runner() -> None:
        time.sleep(0.5)

        async def release_and_run() -> None:
            await hub.release(lock, token or "")
            await runner.replies_run(tenant_id, conversation_a.pk)

        async_to_sync(release_and_run)()

    thread = threading.Thread(target=other_runner)
    thread.start()
    started = time.monotonic()
    response = client_a.post(url(conversation_a), {"content": "Patience"}, format="json")
    thread.join(10)
    assert response.status_code == 201, response.json()
    assert response.json()["reply"]["status"] == "complete"
    assert time.monotonic() - started < 15


def test_event_stream_mirrors_the_websocket(client_a, conversation_a):
    response = client_a.post(
        url(conversation_a),
        {"content": "Stream it", "client_id": "s-1"},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    assert response["Cache-Control"] == "no-cache"
    events = parse_events(response.streaming_content)
    kinds = [name for name, _ in events]
    assert kinds[0] == "ack" and kinds[1] == "reply" and kinds[-1] == "done"
    assert set(kinds[2:-1]) == {"delta"}
    ack = events[0][1]
    assert ack["client_id"] == "s-1" and ack["duplicate"] is False and ack["seq"] == 1
    assert all(data["type"] == name for name, data in events)
    deltas = [data for name, data in events if name == "delta"]
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    done = events[-1][1]
    assert done["status"] == "complete" and done["usage"]["prompt_tokens"] > 0
    with tenant_scope(conversation_a.tenant_id):
        reply = Message.objects.get(pk=done["message_id"])
    assert reply.content == "".join(d["text"] for d in deltas)

    again = client_a.post(
        url(conversation_a),
        {"content": "Stream it", "client_id": "s-1"},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    replayed = parse_events(again.streaming_content)
    assert [name for name, _ in replayed] == ["ack", "reply_state", "done"]
    assert replayed[0][1]["duplicate"] is True
    assert replayed[1][1]["content"] == reply.content
    assert len(rows(conversation_a)) == 2


def test_event_stream_errors_before_streaming_are_json(client_a, conversation_a, conversation_b):
    response = client_a.post(
        url(conversation_a), {"content": " "}, format="json", HTTP_ACCEPT="text/event-stream"
    )
    error_of(response, 400, "empty")
    response = client_a.post(
        url(conversation_b), {"content": "hi"}, format="json", HTTP_ACCEPT="text/event-stream"
    )
    error_of(response, 404, "not_found")


def test_list_is_cursor_paginated_by_seq(client_a, conversation_a, member_a):
    made = [add_message(conversation_a, member_a, f"m{i}") for i in range(5)]
    seen, next_url = [], f"{url(conversation_a)}?page_size=2"
    while next_url:
        body = client_a.get(next_url).json()
        seen += [(m["seq"], m["content"]) for m in body["results"]]
        next_url = body["next"]
    assert seen == [(m.seq, m.content) for m in made]


def test_list_refuses_a_bad_page_size_or_cursor(client_a, conversation_a):
    for size in ("0", "-1", "abc", "\u00b2"):
        error = error_of(client_a.get(url(conversation_a), {"page_size": size}), 400)
        assert list(error["fields"]) == ["page_size"]
    error_of(client_a.get(url(conversation_a), {"cursor": "nonsense"}), 404, "not_found")
    assert client_a.get(url(conversation_a), {"page_size": "1000"}).status_code == 200


def test_message_detail(client_a, conversation_a, member_a):
    message = add_message(conversation_a, member_a, "look")
    body = client_a.get(f"{url(conversation_a)}{message.pk}/").json()
    assert body["content"] == "look" and body["author"] == "member-a" and body["role"] == "user"
    error_of(client_a.get(f"{url(conversation_a)}{10**9}/"), 404, "not_found")


def test_another_tenants_messages_are_404(client_a, conversation_a, conversation_b, member_b):
    theirs = add_message(conversation_b, member_b, "secret")
    error_of(client_a.get(url(conversation_b)), 404, "not_found")
    error_of(client_a.post(url(conversation_b), {"content": "hi"}, format="json"), 404)
    error_of(client_a.get(f"{url(conversation_b)}{theirs.pk}/"), 404, "not_found")
    # Their message id under my own conversation is not found either.
    error_of(client_a.get(f"{url(conversation_a)}{theirs.pk}/"), 404, "not_found")
    assert rows(conversation_b) == [("user", "complete", None)]
