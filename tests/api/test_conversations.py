"""Conversations: list (cursor, filters), create (participants, continues), retrieve,
rename, archive, delete; another tenant's conversation is 404 everywhere."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from tests.api.conftest import API, error_of
from tests.api.helpers import add_message
from tests.factories import make_member

pytestmark = pytest.mark.django_db


def ids(response) -> list[int]:
    return [c["id"] for c in response.json()["results"]]


def test_list_shows_only_the_callers_conversations_newest_first(
    client_a, tenant_a, member_a, admin_a, conversation_a, conversation_b
):
    other = conversation_create(tenant=tenant_a, created_by=admin_a, title="admin only")
    newer = conversation_create(tenant=tenant_a, created_by=member_a, title="Newer")
    response = client_a.get(f"{API}/conversations/")
    assert response.status_code == 200
    assert ids(response) == [newer.pk, conversation_a.pk]
    assert other.pk not in ids(response) and conversation_b.pk not in ids(response)
    first = response.json()["results"][0]
    assert first["participants"] == ["member-a"] and first["created_by"] == "member-a"
    assert first["archived"] is False


def test_list_is_cursor_paginated(client_a, tenant_a, member_a):
    made = [
        conversation_create(tenant=tenant_a, created_by=member_a, title=f"c{i}") for i in range(5)
    ]
    seen: list[int] = []
    url = f"{API}/conversations/?page_size=2"
    pages = 0
    while url:
        body = client_a.get(url).json()
        seen += [c["id"] for c in body["results"]]
        url = body["next"]
        pages += 1
    assert pages == 3
    assert seen == [c.pk for c in reversed(made)]
    error_of(client_a.get(f"{API}/conversations/?cursor=garbage"), 404, "not_found")


def test_list_filters(client_a, tenant_a, member_a):
    plans = conversation_create(tenant=tenant_a, created_by=member_a, title="Holiday PLANS")
    old = conversation_create(tenant=tenant_a, created_by=member_a, title="Old stuff")
    with tenant_scope(tenant_a):
        Conversation.objects.filter(pk=old.pk).update(
            archived_at=timezone.now(), updated_at=timezone.now() - timedelta(days=10)
        )
    assert ids(client_a.get(f"{API}/conversations/?search=plans")) == [plans.pk]
    assert ids(client_a.get(f"{API}/conversations/?archived=true")) == [old.pk]
    assert ids(client_a.get(f"{API}/conversations/?archived=false")) == [plans.pk]
    assert set(ids(client_a.get(f"{API}/conversations/"))) == {plans.pk, old.pk}
    since = (timezone.now() - timedelta(days=1)).isoformat()
    response = client_a.get(f"{API}/conversations/", {"updated_since": since})
    assert ids(response) == [plans.pk]
    error = error_of(client_a.get(f"{API}/conversations/?updated_since=yesterday"), 400)
    assert list(error["fields"]) == ["updated_since"]
    error_of(client_a.get(f"{API}/conversations/?archived=maybe"), 400, "invalid")
    error_of(client_a.get(f"{API}/conversations/?search=a%00b"), 400, "invalid")


def test_create_with_participants(client_a, tenant_a, member_a):
    make_member(tenant_a, username="carol")
    response = client_a.post(
        f"{API}/conversations/",
        {"title": "Team", "participants": ["carol", "member-a", "carol"]},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["title"] == "Team" and body["is_group"] is True
    assert sorted(body["participants"]) == ["carol", "member-a"]
    assert body["created_by"] == "member-a"


def test_create_refuses_unknown_and_other_tenants_users(client_a, member_b):
    for username in ("nobody", "member-b"):
        response = client_a.post(
            f"{API}/conversations/", {"participants": [username]}, format="json"
        )
        error = error_of(response, 400, "invalid")
        assert username in error["fields"]["participants"][0]
    error_of(client_a.post(f"{API}/conversations/", {"participants": "x"}, format="json"), 400)


def test_create_continuing_an_earlier_conversation(
    client_a, conversation_a, member_a, tenant_a, admin_a, conversation_b, monkeypatch
):
    scheduled = []
    monkeypatch.setattr(
        "chats.api.services.schedule_continuation_summary", lambda c: scheduled.append(c.pk)
    )
    response = client_a.post(
        f"{API}/conversations/",
        {"title": "Part 2", "continues": conversation_a.pk, "carry_over_summary": False},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["continues"] == conversation_a.pk and body["carry_over_summary"] is False
    assert scheduled == [body["id"]]
    not_mine = conversation_create(tenant=tenant_a, created_by=admin_a)
    for target in (conversation_b.pk, not_mine.pk, 10**9, 2**63):
        response = client_a.post(f"{API}/conversations/", {"continues": target}, format="json")
        error = error_of(response, 400, "invalid")
        assert list(error["fields"]) == ["continues"]


def test_retrieve(client_a, conversation_a, member_a):
    add_message(conversation_a, member_a, "hello")
    body = client_a.get(f"{API}/conversations/{conversation_a.pk}/").json()
    assert body["id"] == conversation_a.pk and body["message_count"] == 1 and body["last_seq"] == 1


def test_rename_and_archive_with_patch(client_a, conversation_a):
    url = f"{API}/conversations/{conversation_a.pk}/"
    body = client_a.patch(url, {"title": "Renamed"}, format="json").json()
    assert body["title"] == "Renamed" and body["archived"] is False
    body = client_a.patch(url, {"archived": True}, format="json").json()
    assert body["archived"] is True and body["archived_at"]
    body = client_a.patch(url, {"archived": False}, format="json").json()
    assert body["archived"] is False and body["archived_at"] is None
    error_of(client_a.patch(url, {}, format="json"), 400, "invalid")
    error_of(client_a.patch(url, {"archived": "perhaps"}, format="json"), 400, "invalid")


def test_archive_endpoint_is_idempotent(client_a, conversation_a):
    url = f"{API}/conversations/{conversation_a.pk}/archive/"
    first = client_a.post(url).json()
    second = client_a.post(url).json()
    assert first["archived"] is True and second["archived_at"] == first["archived_at"]


def test_delete_by_the_creator_removes_the_messages(client_a, conversation_a, member_a, tenant_a):
    add_message(conversation_a, member_a, "bye")
    assert client_a.delete(f"{API}/conversations/{conversation_a.pk}/").status_code == 204
    with tenant_scope(tenant_a):
        assert not Conversation.objects.filter(pk=conversation_a.pk).exists()
        assert not Message.objects.filter(conversation_id=conversation_a.pk).exists()
    error_of(client_a.get(f"{API}/conversations/{conversation_a.pk}/"), 404, "not_found")


def test_delete_needs_the_creator_or_an_admin(
    client_a, admin_client_a, tenant_a, admin_a, member_a
):
    from chats.services import participant_add

    theirs = conversation_create(tenant=tenant_a, created_by=admin_a, title="admin's")
    participant_add(conversation=theirs, user=member_a)
    mine = conversation_create(tenant=tenant_a, created_by=member_a, title="member's")
    participant_add(conversation=mine, user=admin_a)
    error_of(client_a.delete(f"{API}/conversations/{theirs.pk}/"), 403, "permission_denied")
    assert admin_client_a.delete(f"{API}/conversations/{mine.pk}/").status_code == 204


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("get", "", None),
        ("patch", "", {"title": "mine now"}),
        ("delete", "", None),
        ("post", "archive/", None),
        ("post", "leave/", None),
    ],
)
def test_another_tenants_conversation_is_404_like_a_missing_one(
    client_a, admin_client_a, conversation_b, method, suffix, body
):
    for client in (client_a, admin_client_a):
        for target in (conversation_b.pk, 10**9):
            call = getattr(client, method)
            url = f"{API}/conversations/{target}/{suffix}"
            response = call(url, body, format="json") if body else call(url)
            error = error_of(response, 404, "not_found")
            assert error["message"] == "No such conversation."
    with tenant_scope(conversation_b.tenant_id):
        fresh = Conversation.objects.get(pk=conversation_b.pk)
    assert fresh.title == "Beta plans" and fresh.archived_at is None


def test_a_participant_who_may_not_delete_leaves(client_a, tenant_a, admin_a, member_a):
    from chats.services import participant_add

    theirs = conversation_create(tenant=tenant_a, created_by=admin_a, title="admin's")
    participant_add(conversation=theirs, user=member_a)
    error_of(client_a.delete(f"{API}/conversations/{theirs.pk}/"), 403, "permission_denied")
    assert client_a.post(f"{API}/conversations/{theirs.pk}/leave/").status_code == 204
    error_of(client_a.get(f"{API}/conversations/{theirs.pk}/"), 404, "not_found")
    assert theirs.pk not in ids(client_a.get(f"{API}/conversations/"))
    with tenant_scope(tenant_a):
        assert Conversation.objects.filter(pk=theirs.pk).exists()  # the creator keeps it
