"""Deleting one's own account from the Account page: confirmed with the password (or a recent
log-in without one); their conversations, their messages in shared ones, memories, images,
API keys, exports and memberships go in every tenant, then the user; the turns' cost figures
stay; the session ends and the audit log says so."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage

from chatplatform.models import ApiKey, AuditAction, AuditEvent, Membership, Transfer
from chatplatform.models.conversations import Conversation, Message, Participant, TurnRecord
from chatplatform.services import api_key_create, membership_add
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services.conversations import participant_add
from memory.models import UserFact
from memory.services import fact_save
from summaries.models import Summary
from tests.api.helpers import add_turn
from tests.factories import make_conversation, make_member, make_message, png_image, summary

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def leaving(tenant_a, tenant_b):
    user = make_member(tenant_a, username="leaving")
    user.set_password("correct horse 1")
    user.save()
    membership_add(tenant=tenant_b, user=user)
    return user


def test_deleting_the_account_removes_everything_listed_and_keeps_the_costs(
    client, tenant_a, tenant_b, member_a, leaving, jobs_run
):
    own = make_conversation(tenant_a, leaving, title="Mine")
    image = make_message(own, "Look", author=leaving, image=png_image())
    add_turn(own, leaving, cost="0.250000")
    shared = make_conversation(tenant_a, member_a, title="Shared")
    participant_add(conversation=shared, user=leaving)
    kept = make_message(shared, "From the other member", author=member_a)
    theirs = make_message(shared, "From the leaving user", author=leaving)
    make_message(shared, "A reply to them", role="assistant", answers=theirs)
    summary(shared, 1, 3, "They talked.")
    in_b = make_conversation(tenant_b, leaving, title="In B")
    make_message(in_b, "B side", author=leaving)
    fact_save(tenant_a, leaving, "Likes tea")
    fact_save(tenant_b, leaving, "Likes coffee")
    api_key_create(tenant=tenant_a, name="k", user=leaving)
    client.force_login(leaving)
    client.post("/account/export/", {"format": "claude"})
    with tenant_scope(tenant_a):
        export_file = Transfer.objects.get(user=leaving).file

    refused = client.post(
        "/account/delete/", {"password": "wrong", "confirm": "leaving"}, follow=True
    )
    assert b"That is not your password" in refused.content
    assert get_user_model().objects.filter(pk=leaving.pk).exists()

    response = client.post(
        "/account/delete/", {"password": "correct horse 1", "confirm": "leaving"}
    )
    assert response.status_code == 302
    assert not get_user_model().objects.filter(pk=leaving.pk).exists()
    assert client.get("/account/").status_code == 302  # logged out
    with tenant_scope(tenant_a):
        assert list(Conversation.objects.values_list("title", flat=True)) == ["Shared"]
        assert list(Message.objects.values_list("pk", flat=True)) == [kept.pk]
        assert Conversation.objects.get(pk=shared.pk).message_count == 1
        assert not Summary.objects.filter(conversation_id=shared.pk).exists()
        assert not Participant.objects.filter(conversation_id=shared.pk, user_id=leaving.pk)
        assert not UserFact.objects.exists() and not ApiKey.objects.filter(user_id=leaving.pk)
        assert not Transfer.objects.exists()
        record = TurnRecord.objects.get()
        event = AuditEvent.objects.get(action=AuditAction.ACCOUNT_DELETED)
    assert record.cost_usd == Decimal("0.25") and record.user_id is None
    assert event.actor_label == "leaving" and event.changes["conversations"] == [1, 0]
    assert event.changes["messages_in_shared_conversations"] == [1, 0]
    with tenant_scope(tenant_b):
        assert not Conversation.objects.exists() and not UserFact.objects.exists()
        assert AuditEvent.objects.filter(action=AuditAction.ACCOUNT_DELETED).count() == 1
    with all_tenants():
        assert not Membership.objects.filter(user_id=leaving.pk).exists()
    assert not default_storage.exists(image.attachment.name)
    from chats.transfer.files import transfer_storage

    assert not transfer_storage().exists(export_file)
    # The other member is untouched.
    with tenant_scope(tenant_a):
        assert Membership.objects.filter(user=member_a).exists()


def test_the_confirmation_must_name_the_account(client, leaving):
    client.force_login(leaving)
    page = client.post(
        "/account/delete/", {"password": "correct horse 1", "confirm": "someone"}, follow=True
    )
    assert b"Type your username exactly" in page.content
    assert get_user_model().objects.filter(pk=leaving.pk).exists()


def test_without_a_password_a_recent_log_in_confirms(client, tenant_a):
    from datetime import timedelta

    from django.utils import timezone

    user = make_member(tenant_a, username="sso-user")
    user.set_unusable_password()
    user.last_login = timezone.now() - timedelta(hours=1)
    user.save()
    client.force_login(user)  # force_login does not move last_login in tests
    get_user_model().objects.filter(pk=user.pk).update(
        last_login=timezone.now() - timedelta(hours=1)
    )
    page = client.post("/account/delete/", {"confirm": "sso-user"}, follow=True)
    assert b"Log out and in again" in page.content
    get_user_model().objects.filter(pk=user.pk).update(last_login=timezone.now())
    client.post("/account/delete/", {"confirm": "sso-user"})
    assert not get_user_model().objects.filter(pk=user.pk).exists()
