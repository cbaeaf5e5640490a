"""The turn's candidate read: history that can fit and the user's facts, in one query."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from chatplatform.db import server_side_binding
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.selectors import recent_messages_and_facts
from chats.services import conversation_create, message_create
from memory.models import UserFact
from summaries.models import Summary
from summaries.selectors import current_summaries

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Chat")
    for i in range(30):
        role = "user" if i % 2 == 0 else "assistant"
        message_create(
            conversation=conversation,
            role=role,
            content=f"message {i}",
            author=member_a if role == "user" else None,
        )
    with tenant_scope(tenant_a):
        Message.objects.filter(conversation=conversation).update(token_count=10)
    return conversation


def read(conversation, user_id, **overrides):
    options = dict(
        user_id=user_id,
        max_facts=5,
        before_seq=31,
        after_seq=0,
        limit=100,
        ceiling=10_000,
        min_messages=2,
        overhead=3,
        bot_name="Bot",
    )
    options.update(overrides)
    return recent_messages_and_facts(conversation, **options)


def test_one_query_returns_the_fitting_newest_run_and_the_users_facts(
    conversation, tenant_a, member_a, tenant_b, member_b, django_assert_num_queries
):
    now = timezone.now()
    with tenant_scope(tenant_a):
        for age in range(7):
            fact = UserFact.objects.create(tenant=tenant_a, user=member_a, text=f"fact {age}")
            UserFact.objects.filter(pk=fact.pk).update(created_at=now - timedelta(days=age))
        UserFact.objects.create(tenant=tenant_a, user=member_a, text="old", superseded_at=now)
    with tenant_scope(tenant_b):
        UserFact.objects.create(tenant=tenant_b, user=member_b, text="SECRET-OF-TENANT-B")

    with django_assert_num_queries(1):
        # 13 tokens a message: 5 messages have at most 52 newer tokens before them.
        recent, facts = read(conversation, member_a.pk, ceiling=52)
    assert [m.seq for m in recent] == [30, 29, 28, 27, 26]
    assert {m.role for m in recent} == {"user", "assistant"}
    assert all(m.author == "Bot" for m in recent if m.role == "assistant")
    assert [f.text for f in facts] == [f"fact {age}" for age in range(5)]  # newest first

    _, theirs = read(conversation, member_b.pk)
    assert theirs == []  # another tenant's user: none of tenant A's facts, none of theirs


def test_minimum_messages_and_no_facts(conversation, member_a, django_assert_num_queries):
    with django_assert_num_queries(1):
        recent, facts = read(conversation, None, ceiling=0, min_messages=3)
    assert [m.seq for m in recent] == [30, 29, 28]
    assert facts == []
    recent, _ = read(conversation, member_a.pk, after_seq=27, ceiling=10_000)
    assert [m.seq for m in recent] == [30, 29, 28]


@pytest.mark.parametrize("ceiling", [0, 13, 51, 52, 53, 130, 200, 389, 390, 10_000])
@pytest.mark.parametrize("min_messages", [0, 2, 40])
def test_the_bound_is_the_one_at_a_time_walk(conversation, member_a, ceiling, min_messages):
    """Whether every capped row fits (one aggregate) or not (the window walk), the rows read
    are the ones the walk newest to oldest takes."""
    recent, _ = read(conversation, member_a.pk, ceiling=ceiling, min_messages=min_messages)
    expected, newer = [], 0
    for position, seq in enumerate(range(30, 0, -1), start=1):
        if position > min_messages and newer > ceiling:
            break
        expected.append(seq)
        newer += 10 + 3  # the stored count and the overhead
    assert [m.seq for m in recent] == expected


def test_private_chats_read_no_names_and_groups_label_people(conversation, member_a):
    member_a.first_name, member_a.last_name = "Ann", "Lee"
    member_a.save()
    private, _ = read(conversation, None, labels=False)
    group, _ = read(conversation, None, labels=True)
    assert [(m.role, m.author) for m in private[:2]] == [("assistant", "Bot"), ("user", "")]
    label = f"Ann Lee (@{member_a.username})"
    assert [(m.role, m.author) for m in group[:2]] == [("assistant", "Bot"), ("user", label)]
    assert [m._replace(author="") for m in group] == [m._replace(author="") for m in private]


def test_items_read_again_are_reused_only_when_nothing_changed(conversation, member_a):
    first, _ = read(conversation, None)
    again, _ = read(conversation, None)
    assert all(a is b for a, b in zip(first, again, strict=True))  # the same objects
    newest = first[0]
    with tenant_scope(conversation.tenant_id):
        Message.objects.filter(pk=newest.id).update(content="edited", token_count=2)
    edited, _ = read(conversation, None)
    assert (edited[0].content, edited[0].tokens) == ("edited", 2)
    assert all(a is b for a, b in zip(first[1:], edited[1:], strict=True))


@pytest.mark.postgres
def test_the_history_statement_is_prepared_once_per_connection(conversation, member_a):
    if not server_side_binding():
        pytest.skip("prepared statements need server-side binding (DB_SERVER_SIDE_BINDING=1)")
    before = connection.connection.prepare_threshold
    for _ in range(3):
        recent, _ = read(conversation, member_a.pk)
    assert [m.seq for m in recent] == list(range(30, 0, -1))
    assert connection.connection.prepare_threshold == before  # other statements: untouched
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert len([s for s in prepared if "FROM chats_message m" in s]) == 1


def make_summary(tenant, conversation, kind, first, last, **extra):
    values = dict(
        tenant=tenant,
        conversation=conversation,
        kind=kind,
        first_seq=first,
        last_seq=last,
        text=f"{kind} {first}-{last}",
        token_count=5,
        token_counter="o200k_base",
        model="offline",
        prompt_version="1",
    )
    values.update(extra)
    return Summary.objects.create(**values)


def test_current_summaries_in_one_query_in_order_with_aware_dates(
    conversation, tenant_a, tenant_b, member_a, member_b, django_assert_num_queries
):
    now = timezone.now()
    week = dict(period_start=now - timedelta(days=7), period_end=now)
    with tenant_scope(tenant_a):
        for first in (1, 11, 21):
            make_summary(tenant_a, conversation, "rolling", first, first + 9)
        make_summary(tenant_a, conversation, "rolling", 1, 20, superseded_at=now)
        make_summary(tenant_a, conversation, "recent", 1, 30, **week)
        make_summary(tenant_a, conversation, "long", 1, 30, level=1)
        continued = conversation_create(
            tenant=tenant_a, created_by=member_a, title="Next", continues=conversation
        )
    with tenant_scope(tenant_b):
        theirs = conversation_create(tenant=tenant_b, created_by=member_b, title="B")
        make_summary(tenant_b, theirs, "rolling", 1, 99, text="SECRET-OF-TENANT-B")

    with django_assert_num_queries(1):
        items = current_summaries(conversation, max_rolling=2)
    assert [(s.kind, s.last_seq) for s in items] == [
        ("rolling", 30),
        ("rolling", 20),
        ("recent", 30),
        ("long", 30),
    ]
    recent = items[2]
    assert recent.first_at == week["period_start"] and recent.last_at == week["period_end"]
    assert all(s.created_at is not None and timezone.is_aware(s.created_at) for s in items)

    with django_assert_num_queries(1):
        carried = current_summaries(continued, max_rolling=3)
    # The newest current summary by last_seq, then by creation (the long-term one, made last).
    assert [(s.kind, s.text) for s in carried] == [("carried", "long 1-30")]
