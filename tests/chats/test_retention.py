"""A tenant's retention: the daily job deletes the conversations nobody has written in for
its period, with their messages, images and summaries, and keeps every turn's cost figures
and whose turn it was in the usage reports; deleting a conversation by hand does the same."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from chatplatform.models.conversations import Conversation, Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats import tasks
from chats.api.selectors import usage_by_day_and_model
from chats.services.conversations import conversation_delete
from summaries.models import Summary
from tests.api.helpers import add_turn
from tests.factories import make_conversation, make_message, png_image, summary

pytestmark = pytest.mark.django_db(transaction=True)


def aged(conversation: Conversation, days: int) -> None:
    """Nobody has written in ``conversation`` for ``days`` days."""
    with tenant_scope(conversation.tenant_id):
        Conversation.objects.filter(pk=conversation.pk).update(
            updated_at=timezone.now() - timedelta(days=days)
        )


def with_history(tenant, user, title: str) -> tuple[Conversation, str]:
    """A conversation with an image message, a turn record and a summary; and its image's
    file name."""
    conversation = make_conversation(tenant, user, title=title)
    image = make_message(conversation, "Look", author=user, image=png_image())
    add_turn(conversation, user, cost="0.250000")
    summary(conversation, 1, 2, "They looked at a picture.")
    return conversation, image.attachment.name


def usage_cost(tenant, author=None) -> Decimal:
    today = timezone.localdate()
    rows = usage_by_day_and_model(tenant.pk, since=today, until=today, author=author)
    return sum((row.cost_usd for row in rows), Decimal(0))


def test_the_job_deletes_what_is_past_retention_and_keeps_the_cost(
    tenant_a, member_a, tenant_b, member_b
):
    old, old_file = with_history(tenant_a, member_a, "old")
    recent, recent_file = with_history(tenant_a, member_a, "recent")
    elsewhere, elsewhere_file = with_history(tenant_b, member_b, "no retention")
    aged(old, 31)
    aged(recent, 29)
    aged(elsewhere, 400)
    tenant_a.retention_days = 30
    tenant_a.save(update_fields=["retention_days"])
    before = usage_cost(tenant_a, member_a)

    assert tasks.expire_conversations() == 1
    assert tasks.expire_conversations() == 0  # idempotent

    with tenant_scope(tenant_a):
        assert list(Conversation.objects.values_list("title", flat=True)) == ["recent"]
        assert not Message.objects.filter(conversation_id=old.pk).exists()
        assert not Summary.objects.filter(conversation_id=old.pk).exists()
        kept = TurnRecord.objects.get(cost_usd=Decimal("0.25"), conversation__isnull=True)
    assert kept.user_id == member_a.pk and kept.user_message_id is None
    assert kept.included == [] and kept.excluded == []
    assert usage_cost(tenant_a, member_a) == usage_cost(tenant_a) == before == Decimal("0.5")
    assert not default_storage.exists(old_file)
    assert default_storage.exists(recent_file) and default_storage.exists(elsewhere_file)
    with tenant_scope(tenant_b):
        assert Conversation.objects.filter(pk=elsewhere.pk).exists()


def test_without_retention_nothing_is_deleted(tenant_a, member_a):
    conversation, _ = with_history(tenant_a, member_a, "kept")
    aged(conversation, 3650)
    assert tasks.expire_conversations() == 0
    with tenant_scope(tenant_a):
        assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_deleting_a_conversation_removes_its_images_and_keeps_its_costs(tenant_a, member_a):
    conversation, name = with_history(tenant_a, member_a, "mine")
    conversation_delete(conversation, by=member_a)
    assert not default_storage.exists(name)
    with tenant_scope(tenant_a):
        assert TurnRecord.objects.filter(user=member_a, conversation__isnull=True).count() == 1
    assert usage_cost(tenant_a, member_a) == Decimal("0.25")
