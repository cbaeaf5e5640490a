"""Every view answers 404 for another tenant's or another user's object exactly as for a
missing one (same status, same body)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chats.services import conversation_create
from memory.services import fact_save
from tests.factories import make_member
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db

MISSING_ID = 987654


@pytest.fixture
def foreign_objects(tenant_a, tenant_b, member_b):
    """A conversation of another tenant and one of another user of the same tenant."""
    other_user = make_member(tenant_a, username="other-a")
    other_tenant = conversation_create(tenant=tenant_b, created_by=member_b, title="B secret")
    other_user_conversation = conversation_create(
        tenant=tenant_a, created_by=other_user, title="Someone else's"
    )
    answered_turn(other_tenant, member_b, "B's message")
    answered_turn(other_user_conversation, other_user, "Their message")
    return {
        "other tenant": other_tenant.pk,
        "other user": other_user_conversation.pk,
        "missing": MISSING_ID,
    }


def conversation_requests(conversation_id: int):
    return [
        ("get", reverse("chats_ui:conversation_detail", args=[conversation_id]), {}),
        ("get", reverse("chats_ui:turn_meter", args=[conversation_id]), {}),
        ("get", reverse("chats_ui:conversation_summaries", args=[conversation_id]), {}),
        ("post", reverse("chats_ui:participant_add", args=[conversation_id]), {"user": 1}),
        ("get", reverse("chats_ui:message_image", args=[conversation_id, MISSING_ID]), {}),
    ]


def test_conversation_views_hide_what_is_not_the_users(member_client, foreign_objects):
    answers: dict[str, list[tuple[int, bytes]]] = {}
    for label, conversation_id in foreign_objects.items():
        for method, url, data in conversation_requests(conversation_id):
            response = getattr(member_client, method)(url, data)
            assert response.status_code == 404, (label, url)
            answers.setdefault(url.replace(str(conversation_id), "ID"), []).append(
                (response.status_code, response.content)
            )
    for url, seen in answers.items():
        assert len(set(seen)) == 1, f"{url} answers differently for missing and forbidden"


def test_no_secret_leaks_into_the_list_or_search(member_client, foreign_objects):
    for query in ("", "secret", "B's message", "Their message"):
        body = member_client.get(reverse("chats_ui:conversation_list"), {"q": query}).content
        assert b"B secret" not in body and b"Someone else" not in body


def test_another_users_fact_is_not_found(member_client, tenant_a, tenant_b, member_b):
    other = make_member(tenant_a, username="fact-owner")
    same_tenant = fact_save(tenant_a, other, "Owns a boat")
    other_tenant = fact_save(tenant_b, member_b, "Lives in Oslo")
    for fact_id in (same_tenant.pk, other_tenant.pk, MISSING_ID):
        assert member_client.get(reverse("chats_ui:memory_edit", args=[fact_id])).status_code == 404
        assert (
            member_client.post(
                reverse("chats_ui:memory_edit", args=[fact_id]), {"text": "Mine now"}
            ).status_code
            == 404
        )
        assert (
            member_client.get(reverse("chats_ui:memory_history", args=[fact_id])).status_code == 404
        )
        assert (
            member_client.post(reverse("chats_ui:memory_delete", args=[fact_id])).status_code == 404
        )
    listing = member_client.get(reverse("chats_ui:memory_list")).content
    assert b"Owns a boat" not in listing and b"Lives in Oslo" not in listing


def test_a_member_of_both_tenants_sees_each_conversation_only_in_its_tenant(
    client, tenant_a, tenant_b, member_a
):
    from chatplatform.services import membership_add

    membership_add(tenant=tenant_b, user=member_a)
    in_b = conversation_create(tenant=tenant_b, created_by=member_a, title="In B")
    client.force_login(member_a)
    session = client.session
    session["tenant_id"] = tenant_a.pk
    session.save()
    url = reverse("chats_ui:conversation_detail", args=[in_b.pk])
    assert client.get(url).status_code == 404
    client.post(reverse("chats_ui:tenant_switch"), {"tenant_id": tenant_b.pk})
    assert client.get(url).status_code == 200


def test_members_of_another_tenant_cannot_be_added(
    member_client, conversation_a, member_b, tenant_a
):
    url = reverse("chats_ui:participant_add", args=[conversation_a.pk])
    member_client.post(url, {"user": member_b.pk})
    from chats.ui.selectors import participants_of

    assert member_b not in participants_of(conversation_a)
