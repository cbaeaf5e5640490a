"""Periodic summaries: 7-day and 30-day, refreshed at their intervals, each
replacing its predecessor."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from summaries.services import periodic_due_batch, periodic_summary_refresh
from tests.factories import make_conversation
from tests.summaries.helpers import add_messages, db_snapshot, make_policy
from tests.summaries.helpers import summaries_of as all_summaries

pytestmark = pytest.mark.django_db


def current(conversation, kind):
    return all_summaries(conversation, kind=kind, superseded_at__isnull=True)


def daily(conversation, user, days, *, now, per_day=2):
    """``per_day`` messages on each of the last ``days`` days (the newest today)."""
    times = [
        now - timedelta(days=days - 1 - d, hours=1, minutes=m)
        for d in range(days)
        for m in range(per_day)
    ]
    return add_messages(conversation, len(times), user=user, created_at=times)


@pytest.fixture
def policy(tenant_a):
    return make_policy(tenant_a, strategy="hybrid")


def test_recent_and_long_summaries_cover_their_windows(tenant_a, member_a, policy):
    now = timezone.now()
    conversation = make_conversation(tenant_a, member_a)
    messages = daily(conversation, member_a, 40, now=now)
    result = periodic_summary_refresh(tenant_a.pk, conversation.pk, now=now)
    assert result.kinds == {"recent": "created", "long": "created"}
    (recent,) = current(conversation, "recent")
    (long,) = current(conversation, "long")
    in_week = [m for m in messages if m.created_at >= now - timedelta(days=7)]
    in_month = [m for m in messages if m.created_at >= now - timedelta(days=30)]
    assert (recent.first_seq, recent.last_seq) == (in_week[0].seq, in_week[-1].seq)
    assert (long.first_seq, long.last_seq) == (in_month[0].seq, in_month[-1].seq)
    assert recent.token_count <= policy.recent_summary_tokens == 1024
    assert long.token_count <= policy.long_summary_tokens == 4096
    assert recent.period_end == now and recent.period_start == now - timedelta(days=7)
    assert recent.first_message_id == in_week[0].pk and recent.last_message_id == in_week[-1].pk
    assert long.source_tokens > recent.source_tokens


def test_second_run_is_not_due_and_changes_nothing(tenant_a, member_a, policy):
    now = timezone.now()
    conversation = make_conversation(tenant_a, member_a)
    daily(conversation, member_a, 10, now=now)
    periodic_summary_refresh(tenant_a.pk, conversation.pk, now=now)
    before = db_snapshot()
    later = now + timedelta(hours=5)
    result = periodic_summary_refresh(tenant_a.pk, conversation.pk, now=later)
    assert result.kinds == {"recent": "not_due", "long": "not_due"}
    assert db_snapshot() == before


def test_each_kind_is_replaced_at_its_own_interval(tenant_a, member_a, policy):
    now = timezone.now()
    conversation = make_conversation(tenant_a, member_a)
    daily(conversation, member_a, 10, now=now)
    periodic_summary_refresh(tenant_a.pk, conversation.pk, now=now)
    (old_recent,) = current(conversation, "recent")
    (old_long,) = current(conversation, "long")

    later = now + timedelta(days=3)  # recent interval (3 days) passed, long (14) not
    add_messages(conversation, 4, user=member_a, created_at=later - timedelta(hours=2))
    result = periodic_summary_refresh(tenant_a.pk, conversation.pk, now=later)
    assert result.kinds == {"recent": "created", "long": "not_due"}
    (new_recent,) = current(conversation, "recent")
    assert new_recent.pk != old_recent.pk
    old_recent.refresh_from_db()
    assert old_recent.superseded_at == later
    assert current(conversation, "long")[0].pk == old_long.pk

    much_later = now + timedelta(days=14)
    add_messages(conversation, 2, user=member_a, created_at=much_later - timedelta(hours=1))
    result = periodic_summary_refresh(tenant_a.pk, conversation.pk, now=much_later)
    assert result.kinds["long"] == "created"
    assert len(current(conversation, "long")) == 1
    assert len(all_summaries(conversation, kind="long")) == 2


def test_unchanged_window_keeps_the_summary(tenant_a, member_a, policy):
    now = timezone.now()
    conversation = make_conversation(tenant_a, member_a)
    add_messages(conversation, 6, user=member_a, created_at=now - timedelta(hours=3))
    periodic_summary_refresh(tenant_a.pk, conversation.pk, now=now)
    (recent,) = current(conversation, "recent")
    later = now + timedelta(days=3)
    result = periodic_summary_refresh(tenant_a.pk, conversation.pk, now=later)
    assert result.kinds["recent"] == "unchanged"
    (same,) = current(conversation, "recent")
    assert same.pk == recent.pk and same.period_end == later


def test_a_quiet_window_supersedes_the_stale_summary(tenant_a, member_a, policy):
    now = timezone.now()
    conversation = make_conversation(tenant_a, member_a)
    add_messages(conversation, 6, user=member_a, created_at=now - timedelta(days=1))
    periodic_summary_refresh(tenant_a.pk, conversation.pk, now=now)
    later = now + timedelta(days=8)  # the 7-day window no longer holds any message
    result = periodic_summary_refresh(tenant_a.pk, conversation.pk, now=later)
    assert result.kinds["recent"] == "expired"
    assert current(conversation, "recent") == []
    assert len(current(conversation, "long")) == 1


def test_inactive_conversations_get_nothing(tenant_a, member_a, policy):
    now = timezone.now()
    conversation = make_conversation(tenant_a, member_a)
    add_messages(conversation, 6, user=member_a, created_at=now - timedelta(days=60))
    result = periodic_summary_refresh(tenant_a.pk, conversation.pk, now=now)
    assert result.kinds == {"recent": "inactive", "long": "inactive"}
    assert all_summaries(conversation) == []


def test_disabled_by_policy(tenant_a, member_a):
    make_policy(tenant_a, strategy="hybrid", periodic_summaries_enabled=False)
    conversation = make_conversation(tenant_a, member_a)
    add_messages(conversation, 6, user=member_a)
    assert periodic_summary_refresh(tenant_a.pk, conversation.pk).status == "disabled"


def test_cross_tenant_ids_find_nothing(tenant_a, tenant_b, member_b, policy):
    make_policy(tenant_b, strategy="hybrid")
    other = make_conversation(tenant_b, member_b)
    add_messages(other, 6, user=member_b)
    before = db_snapshot()
    assert periodic_summary_refresh(tenant_a.pk, other.pk).status == "not_found"
    assert db_snapshot() == before


def test_due_batches_are_bounded_and_pick_due_conversations(
    tenant_a, tenant_b, member_a, member_b, policy, django_assert_max_num_queries
):
    now = timezone.now()
    make_policy(tenant_b, strategy="hybrid")
    active_a = make_conversation(tenant_a, member_a)
    add_messages(active_a, 4, user=member_a, created_at=now - timedelta(days=2))
    old_a = make_conversation(tenant_a, member_a)
    add_messages(old_a, 4, user=member_a, created_at=now - timedelta(days=20))
    dead_a = make_conversation(tenant_a, member_a)
    add_messages(dead_a, 4, user=member_a, created_at=now - timedelta(days=90))
    archived = make_conversation(tenant_a, member_a)
    add_messages(archived, 4, user=member_a, created_at=now - timedelta(days=1))
    with tenant_scope(tenant_a):
        Conversation.objects.filter(pk=archived.pk).update(archived_at=now)
    active_b = make_conversation(tenant_b, member_b)
    add_messages(active_b, 4, user=member_b, created_at=now - timedelta(hours=1))

    found: list[tuple[int, int, tuple[str, ...]]] = []
    cursor: int | None = 0
    batches = 0
    while cursor is not None:
        with django_assert_max_num_queries(6):
            batch = periodic_due_batch(after_id=cursor or 0, batch_size=2, now=now)
        found.extend(batch.periodic)
        cursor, batches = batch.next_after_id, batches + 1
    assert batches == 3
    due = {conv: kinds for _tenant, conv, kinds in found}
    assert due == {
        active_a.pk: ("recent", "long"),
        old_a.pk: ("long",),
        active_b.pk: ("recent", "long"),
    }
    assert (tenant_b.pk, active_b.pk, ("recent", "long")) in found

    periodic_summary_refresh(tenant_a.pk, active_a.pk, now=now)
    batch = periodic_due_batch(after_id=0, batch_size=100, now=now)
    assert active_a.pk not in {conv for _t, conv, _k in batch.periodic}
