"""New conversations (group members, continuing an earlier one), members."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from chats.ui.selectors import participants_of
from tests.factories import make_member

pytestmark = pytest.mark.django_db


def newest_conversation(tenant) -> Conversation:
    with tenant_scope(tenant):
        return Conversation.objects.order_by("-pk")[0]


def conversation_count(tenant) -> int:
    with tenant_scope(tenant):
        return Conversation.objects.count()


def test_start_a_group_conversation(member_client, tenant_a, member_a):
    colleague = make_member(tenant_a, username="colleague", first_name="Cora", last_name="Lee")
    form = member_client.get(reverse("chats_ui:conversation_new")).content.decode()
    assert "Cora Lee (@colleague)" in form
    assert "service-" not in form  # the tenant's service user is not offered
    response = member_client.post(
        reverse("chats_ui:conversation_new"), {"title": "Team", "participants": [colleague.pk]}
    )
    conversation = newest_conversation(tenant_a)
    assert response["Location"] == reverse("chats_ui:conversation_detail", args=[conversation.pk])
    assert conversation.is_group and conversation.title == "Team"
    assert set(participants_of(conversation)) == {member_a, colleague}


def test_members_of_another_tenant_are_refused(member_client, tenant_a, member_b):
    response = member_client.post(
        reverse("chats_ui:conversation_new"), {"title": "x", "participants": [member_b.pk]}
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert conversation_count(tenant_a) == 0


def test_continue_an_earlier_conversation_with_or_without_its_summary(
    member_client, tenant_a, member_a
):
    earlier = conversation_create(tenant=tenant_a, created_by=member_a, title="Earlier")
    member_client.post(
        reverse("chats_ui:conversation_new"),
        {"title": "Later", "continues": earlier.pk, "carry_over_summary": "on"},
    )
    later = newest_conversation(tenant_a)
    assert later.continues_id == earlier.pk and later.carry_over_summary
    member_client.post(
        reverse("chats_ui:conversation_new"), {"title": "Fresh", "continues": earlier.pk}
    )
    fresh = newest_conversation(tenant_a)
    assert fresh.continues_id == earlier.pk and not fresh.carry_over_summary


def test_cannot_continue_someone_elses_conversation(member_client, tenant_a, tenant_b, member_b):
    other = make_member(tenant_a, username="other")
    theirs = conversation_create(tenant=tenant_a, created_by=other, title="Theirs")
    foreign = conversation_create(tenant=tenant_b, created_by=member_b, title="Foreign")
    for conversation in (theirs, foreign):
        response = member_client.post(
            reverse("chats_ui:conversation_new"), {"title": "x", "continues": conversation.pk}
        )
        assert response.status_code == 200
        assert "Select a valid choice" in response.content.decode()


def test_add_a_member_to_a_conversation(member_client, tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Solo")
    colleague = make_member(tenant_a, username="joiner")
    page = member_client.get(reverse("chats_ui:conversation_detail", args=[conversation.pk]))
    assert b"@joiner" in page.content
    response = member_client.post(
        reverse("chats_ui:participant_add", args=[conversation.pk]), {"user": colleague.pk}
    )
    assert response.status_code == 302
    assert colleague in participants_of(conversation)
    with tenant_scope(tenant_a):
        conversation.refresh_from_db()
    assert conversation.is_group
