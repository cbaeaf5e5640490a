"""Regenerate the last reply and edit-and-resend the last user message over the REST API; the
replaced versions are kept; refusals are clear; another tenant's message is 404."""

from __future__ import annotations

import pytest

from chatplatform.models.conversations import MessageRevision
from chatplatform.tenancy.scoping import tenant_scope
from tests.api.conftest import API, error_of

pytestmark = pytest.mark.django_db(transaction=True)


def messages_url(conversation) -> str:
    return f"{API}/conversations/{conversation.pk}/messages/"


def send(client, conversation, text="Hello there") -> dict:
    response = client.post(messages_url(conversation), {"content": text}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def reasons(tenant) -> list[str]:
    with tenant_scope(tenant):
        return list(MessageRevision.objects.order_by("pk").values_list("reason", flat=True))


def test_regenerate_returns_the_new_reply_with_the_same_id(client_a, conversation_a, tenant_a):
    sent = send(client_a, conversation_a)
    reply_id = sent["reply"]["id"]
    response = client_a.post(f"{messages_url(conversation_a)}{reply_id}/regenerate/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["reply"]["id"] == reply_id and body["reply"]["status"] == "complete"
    assert body["message"]["id"] == sent["message"]["id"]
    assert reasons(tenant_a) == ["regenerated"]


def test_edit_answers_the_new_text_and_keeps_the_old(client_a, conversation_a, tenant_a):
    sent = send(client_a, conversation_a, "Hello there")
    url = f"{messages_url(conversation_a)}{sent['message']['id']}/edit/"
    response = client_a.post(url, {"content": "Hello again"}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["message"]["content"] == "Hello again" and body["message"]["edited_at"]
    assert body["reply"]["status"] == "complete"
    with tenant_scope(tenant_a):
        assert MessageRevision.objects.get(reason="edited").content == "Hello there"
    listed = client_a.get(messages_url(conversation_a)).json()["results"]
    assert next(m["content"] for m in listed) == "Hello again"


def test_refusals(client_a, conversation_a):
    first = send(client_a, conversation_a, "First")
    second = send(client_a, conversation_a, "Second")
    old_reply = f"{messages_url(conversation_a)}{first['reply']['id']}/regenerate/"
    response = client_a.post(old_reply)
    error_of(response, 409, "not_last")
    edit = f"{messages_url(conversation_a)}{first['message']['id']}/edit/"
    response = client_a.post(edit, {"content": "x"}, format="json")
    error_of(response, 409, "not_last")
    response = client_a.post(
        f"{messages_url(conversation_a)}{second['message']['id']}/edit/",
        {"content": "   "},
        format="json",
    )
    error_of(response, 400, "empty")


def test_another_tenants_message_is_404(client_a, client_b, conversation_a, conversation_b):
    theirs = send(client_b, conversation_b)
    mine = send(client_a, conversation_a)
    for url in (
        f"{messages_url(conversation_b)}{theirs['reply']['id']}/regenerate/",
        f"{messages_url(conversation_a)}{theirs['reply']['id']}/regenerate/",
    ):
        error_of(client_a.post(url), 404)
    response = client_b.post(
        f"{messages_url(conversation_b)}{mine['message']['id']}/edit/",
        {"content": "hijack"},
        format="json",
    )
    error_of(response, 404)
