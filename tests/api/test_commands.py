"""Chat commands over the REST API and its server-sent events: ``/memories [page]`` is answered
as on the WebSocket (the same service and the same ``command`` event), without the model,
storing nothing; a page that does not exist is a clear 400; another tenant's conversation is
404."""

from __future__ import annotations

import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from memory.services import fact_save
from tests.api.conftest import API, error_of
from tests.api.sse import parse_events

pytestmark = pytest.mark.django_db(transaction=True)


def url(conversation) -> str:
    return f"{API}/conversations/{conversation.pk}/messages/"


def stored(conversation) -> int:
    with tenant_scope(conversation.tenant_id):
        return Message.objects.filter(conversation_id=conversation.pk).count()


def test_memories_are_answered_without_the_model(client_a, conversation_a, tenant_a, member_a):
    fact_save(tenant_a, member_a, "likes green tea")
    response = client_a.post(
        url(conversation_a), {"content": "/memories", "client_id": "cmd-1"}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["type"] == "command" and body["command"] == "memories"
    assert body["client_id"] == "cmd-1"
    assert body["text"].startswith("Your facts (page 1 of 1, 1 in all):")
    assert "1. likes green tea" in body["text"]
    assert "offline" not in body["text"].lower()
    assert stored(conversation_a) == 0


def test_pages_and_a_missing_page(client_a, conversation_a, tenant_a, member_a):
    for number in range(12):
        fact_save(tenant_a, member_a, f"fact number {number}")
    second = client_a.post(url(conversation_a), {"content": "/memories 2"}, format="json")
    assert second.status_code == 200
    assert second.json()["text"].startswith("Your facts (page 2 of 2, 12 in all):")
    assert second.json()["client_id"] is None

    error = error_of(
        client_a.post(url(conversation_a), {"content": "/memories 7"}, format="json"),
        400,
        "invalid_page",
    )
    assert "2 pages" in error["message"]
    assert error["fields"] == {"content": [error["message"]]}
    assert stored(conversation_a) == 0


def test_only_the_senders_own_facts_are_listed(
    client_a, conversation_a, tenant_a, member_a, admin_a
):
    fact_save(tenant_a, admin_a, "the admin's secret plan")
    body = client_a.post(url(conversation_a), {"content": "/memories"}, format="json").json()
    assert body["text"] == "No memories saved yet."


def test_the_event_stream_is_the_websockets_command_event(
    client_a, conversation_a, tenant_a, member_a
):
    fact_save(tenant_a, member_a, "prefers window seats")
    response = client_a.post(
        url(conversation_a),
        {"content": "/memories", "client_id": "cmd-s"},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    events = parse_events(response.streaming_content)
    assert [name for name, _ in events] == ["command"]
    data = events[0][1]
    assert data["type"] == "command" and data["client_id"] == "cmd-s"
    assert "1. prefers window seats" in data["text"]
    assert stored(conversation_a) == 0


def test_a_missing_page_over_the_event_stream_is_an_http_error(client_a, conversation_a):
    response = client_a.post(
        url(conversation_a),
        {"content": "/memories 0"},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert response.status_code == 400
    assert b"invalid_page" in response.content


def test_another_tenants_conversation_is_not_found(client_b, conversation_a, tenant_a, member_a):
    fact_save(tenant_a, member_a, "likes green tea")
    error_of(client_b.post(url(conversation_a), {"content": "/memories"}, format="json"), 404)


def test_standing_instructions_come_first_under_their_own_heading(
    client_a, conversation_a, tenant_a, member_a, admin_a
):
    fact_save(tenant_a, member_a, "likes green tea")
    fact_save(tenant_a, member_a, "From now on, answer in Spanish", kind="instruction")
    fact_save(tenant_a, member_a, "I prefer minimal dependencies", kind="preference")
    fact_save(tenant_a, admin_a, "Always answer in haiku", kind="instruction")
    text = client_a.post(url(conversation_a), {"content": "/memories"}, format="json").json()[
        "text"
    ]
    assert text.splitlines()[:4] == [
        "How you want to be answered (2):",
        "- Preference: I prefer minimal dependencies",
        "- Instruction: From now on, answer in Spanish",
        "",
    ]
    assert "Your facts (page 1 of 1, 1 in all):\n1. likes green tea" in text
    assert "haiku" not in text  # another user's


def test_only_instructions_say_there_are_no_facts(client_a, conversation_a, tenant_a, member_a):
    fact_save(tenant_a, member_a, "Always include version numbers", kind="instruction")
    text = client_a.post(url(conversation_a), {"content": "/memories"}, format="json").json()[
        "text"
    ]
    assert text == (
        "How you want to be answered (1):\n- Instruction: Always include version numbers\n\n"
        "No facts saved yet."
    )
