"""The versions of an edited or regenerated message: the earlier ones (kept as revisions) and
the current, for the conversation's participants only; one not-found for missing and
forbidden, in the selector, the page's endpoint and the REST API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.selectors import message_versions
from chats.services.revisions import reply_regenerate, user_message_edit
from chats.ui.selectors import message_window
from tests.api.conftest import API, key_client
from tests.factories import make_member, make_message

pytestmark = pytest.mark.django_db


def revised_exchange(conversation, author):
    """A question edited once and its reply written three times (two regenerations, then
    the edit's new reply)."""
    question = make_message(conversation, "What is the capital of France?", author=author)
    reply = make_message(conversation, "Paris.", role="assistant", answers=question)
    reply_regenerate(conversation=conversation, user=author, reply_id=reply.pk)
    answered(reply, "Paris, of course.")
    user_message_edit(
        conversation=conversation,
        user=author,
        message_id=question.pk,
        content="What is the capital of Spain?",
    )
    answered(reply, "Madrid.")
    return question, reply


def answered(reply, text: str) -> None:
    """The new reply written (what the reply runner does)."""
    with tenant_scope(reply.tenant_id):
        Message.objects.filter(pk=reply.pk).update(content=text, status="complete")


def test_versions_are_the_earlier_texts_then_the_current(conversation, member_a, tenant_a):
    question, reply = revised_exchange(conversation, member_a)

    asked = message_versions(member_a, conversation.pk, question.pk, tenant_id=tenant_a.pk)
    answered = message_versions(member_a, conversation.pk, reply.pk, tenant_id=tenant_a.pk)
    assert asked is not None and answered is not None

    assert [v.content for v in asked] == [
        "What is the capital of France?",
        "What is the capital of Spain?",
    ]
    assert [v.replaced for v in asked] == ["edited", ""]
    assert [v.content for v in answered] == ["Paris.", "Paris, of course.", "Madrid."]
    assert [v.number for v in answered] == [1, 2, 3]
    assert [v.current for v in answered] == [False, False, True]
    assert [v.replaced for v in answered] == ["regenerated", "resent", ""]
    # The page knows which messages have versions to step through.
    counts = {m.message.pk: m.versions for m in message_window(conversation).messages}
    assert counts == {question.pk: 2, reply.pk: 3}


def test_a_message_never_revised_has_one_version(conversation, member_a, tenant_a):
    message = make_message(conversation, "Hello", author=member_a)
    versions = message_versions(member_a, conversation.pk, message.pk, tenant_id=tenant_a.pk)
    assert versions is not None
    assert [(v.number, v.content, v.current) for v in versions] == [(1, "Hello", True)]


def test_missing_and_forbidden_are_the_same_none(
    conversation, conversation_b, member_a, member_b, tenant_a, tenant_b
):
    _, reply = revised_exchange(conversation, member_a)
    other_question, _ = revised_exchange(conversation_b, member_b)
    outsider = make_member(tenant_a)  # same tenant, not a participant

    assert message_versions(member_b, conversation.pk, reply.pk, tenant_id=tenant_b.pk) is None
    assert message_versions(member_b, conversation.pk, reply.pk) is None
    assert message_versions(outsider, conversation.pk, reply.pk, tenant_id=tenant_a.pk) is None
    # Another conversation's message under one's own conversation id.
    assert (
        message_versions(member_a, conversation.pk, other_question.pk, tenant_id=tenant_a.pk)
        is None
    )
    assert message_versions(member_a, conversation.pk, 10**9, tenant_id=tenant_a.pk) is None
    assert message_versions(member_a, conversation.pk, "x", tenant_id=tenant_a.pk) is None


def test_the_page_endpoint_denies_other_tenants_alike(
    client, conversation, member_a, member_b, tenant_a
):
    _, reply = revised_exchange(conversation, member_a)
    url = reverse("chats_ui:message_versions", args=[conversation.pk, reply.pk])
    client.force_login(member_a)
    body = client.get(url).json()
    assert [v["content"] for v in body["versions"]] == ["Paris.", "Paris, of course.", "Madrid."]
    assert body["versions"][-1]["current"] is True
    missing = reverse("chats_ui:message_versions", args=[conversation.pk, reply.pk + 1000])
    assert client.get(missing).status_code == 404

    client.force_login(member_b)
    assert client.get(url).status_code == 404


def test_the_rest_api_lists_versions_and_denies_other_tenants_alike(
    conversation, member_a, member_b, tenant_a, tenant_b
):
    key_a = api_key_create(tenant=tenant_a, name="a", user=member_a)[1]
    key_b = api_key_create(tenant=tenant_b, name="b", user=member_b)[1]
    _, reply = revised_exchange(conversation, member_a)
    url = f"{API}/conversations/{conversation.pk}/messages/{reply.pk}/versions/"
    response = key_client(key_a).get(url)
    assert response.status_code == 200, response.json()
    assert [v["replaced"] for v in response.json()["versions"]] == ["regenerated", "resent", ""]

    denied = key_client(key_b).get(url)
    missing = key_client(key_a).get(
        f"{API}/conversations/{conversation.pk}/messages/{reply.pk + 1000}/versions/"
    )
    assert denied.status_code == missing.status_code == 404
    assert denied.json() == missing.json()
