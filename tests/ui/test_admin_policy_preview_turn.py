"""The policy preview assembles a member's turn, with that member's facts: the admin picks a
member who takes part in the conversation (by default the author of its last user message)
and the meter shows the facts; people of another tenant are refused like missing ones."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models import ContextPolicy
from chatplatform.tenancy.scoping import all_tenants
from chats.services import conversation_create
from memory.services import fact_save
from tests.factories import make_member
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin_a):
    client.force_login(admin_a)
    return client


@pytest.fixture
def talk(tenant_a, member_a):
    """A conversation of member-a (two facts) with other-a (no facts) taking part."""
    other = make_member(tenant_a, username="other-a")
    conversation = conversation_create(
        tenant=tenant_a, created_by=member_a, title="Plans", participants=[other]
    )
    answered_turn(conversation, member_a, "Where shall we meet?")
    fact_save(tenant_a, member_a, "Lives in Lisbon", key="home city", shareable=True)
    fact_save(tenant_a, member_a, "Prefers trains over planes", shareable=True)
    # A group chat's turn holds only the facts their owner shares with the group.
    fact_save(tenant_a, member_a, "Allergic to penicillin")
    return conversation, other


def preview_url() -> str:
    with all_tenants():
        hybrid = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid")
    return reverse("admin:chatplatform_contextpolicy_preview", args=[hybrid.pk])


def facts_segment(meter: dict) -> dict:
    return next(s for s in meter["segments"] if s["name"] == "facts")


def test_the_preview_is_the_last_authors_turn_with_their_facts(admin_client, talk, member_a):
    conversation, _ = talk
    response = admin_client.get(preview_url(), {"conversation": conversation.pk})
    assert response.status_code == 200
    comparison = response.context["comparison"]
    assert comparison["author"] == member_a
    for meter in (comparison["this"], comparison["active"]):
        assert facts_segment(meter)["items"] == 2 and facts_segment(meter)["tokens"] > 0
    body = response.content.decode()
    assert "The next turn of <strong>member-a</strong>" in body
    assert "Facts</td>" in body


def test_the_admin_picks_whose_turn_it_is(admin_client, talk):
    conversation, other = talk
    page = admin_client.get(preview_url()).content.decode()
    assert 'name="user"' in page and "other-a" in page
    response = admin_client.get(preview_url(), {"conversation": conversation.pk, "user": other.pk})
    comparison = response.context["comparison"]
    assert comparison["author"] == other
    assert facts_segment(comparison["this"])["items"] == 0


def test_a_member_who_does_not_take_part_is_refused(admin_client, talk, tenant_a):
    conversation, _ = talk
    outsider = make_member(tenant_a, username="outsider-a")
    conversation_create(tenant=tenant_a, created_by=outsider, title="Elsewhere")
    response = admin_client.get(
        preview_url(), {"conversation": conversation.pk, "user": outsider.pk}
    )
    assert response.context["comparison"] is None
    assert "does not take part in this conversation" in response.content.decode()


def test_another_tenants_user_is_refused_like_a_missing_one(admin_client, talk, tenant_b, member_b):
    conversation, _ = talk
    conversation_create(tenant=tenant_b, created_by=member_b, title="B's")
    page = admin_client.get(preview_url()).content.decode()
    assert member_b.username not in page
    for user_id in (member_b.pk, 10**9):
        response = admin_client.get(
            preview_url(), {"conversation": conversation.pk, "user": user_id}
        )
        assert response.status_code == 200 and response.context["comparison"] is None
        assert response.context["form"].errors["user"] == [
            "Select a valid choice. That choice is not one of the available choices."
        ]


def test_the_preview_shows_the_authors_standing_instructions_like_facts(
    admin_client, talk, tenant_a, member_a
):
    conversation, other = talk
    fact_save(tenant_a, member_a, "Always answer in Spanish", kind="instruction", shareable=True)
    fact_save(tenant_a, member_a, "I prefer short answers", kind="preference", shareable=True)
    response = admin_client.get(preview_url(), {"conversation": conversation.pk})
    for meter in (response.context["comparison"]["this"], response.context["comparison"]["active"]):
        [section] = [s for s in meter["segments"] if s["name"] == "instructions"]
        assert section["label"] == "Instructions"
        assert section["items"] == 2 and section["tokens"] > 0
        assert facts_segment(meter)["items"] == 2  # facts stay their own section
    body = response.content.decode()
    assert "Instructions</td>" in body and "seg-instructions" in body
    someone_else = admin_client.get(
        preview_url(), {"conversation": conversation.pk, "user": other.pk}
    ).context["comparison"]["this"]
    [section] = [s for s in someone_else["segments"] if s["name"] == "instructions"]
    assert section["items"] == 0
