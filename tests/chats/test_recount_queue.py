"""Messages without a valid count are estimated on the fly at assembly and queued, after
commit and at most once per conversation per window, for the token backfill, which counts
them with the policy model's counter (real database, real task run eagerly)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from celery.signals import task_prerun
from django.db.models import Count, Sum

from chatplatform.core.tokens import get_counter
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies.turns import turn_prepare
from chats.services import conversation_create, message_create
from chats.token_counts.backfill import backfill_messages
from config.celery import app as celery_app
from tests.chats.test_assembly import make_policy

pytestmark = pytest.mark.django_db

O200K = get_counter("o200k_base")


@pytest.fixture(autouse=True)
def _isolated_claims(settings) -> None:
    """Each test claims its windows in its own namespace (the cache may be a shared Redis)."""
    settings.SUMMARIES_LOCK_PREFIX = f"test-locks:{uuid.uuid4().hex}"


@pytest.fixture
def recount_runs() -> Iterator[list[tuple]]:
    """Tasks run in-process (errors propagate); the recount runs are recorded."""
    runs: list[tuple] = []

    def record(sender=None, args=None, **_kwargs):
        if sender is not None and sender.name == "summaries.tasks.recount_message_tokens":
            runs.append(tuple(args or ()))

    old = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = celery_app.conf.task_eager_propagates = True
    task_prerun.connect(record, weak=False)
    try:
        yield runs
    finally:
        task_prerun.disconnect(record)
        celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = old


@pytest.fixture
def chat(tenant_a, member_a):
    policy = make_policy(tenant_a, strategy="sliding_window")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Legacy")
    with tenant_scope(tenant_a):
        Conversation.objects.filter(pk=conversation.pk).update(policy=policy)
        conversation.refresh_from_db()
    for i in range(12):
        role = "user" if i % 2 == 0 else "assistant"
        message_create(
            conversation=conversation,
            role=role,
            content=f"message {i} about the budget of the second quarter",
            author=member_a if role == "user" else None,
        )
    return conversation


def break_counts(conversation) -> tuple[list[int], list[int]]:
    """Four legacy rows (no count) and three counted by another counter, as an import or a
    model switch leaves them (history_tokens follows the same convention as the backfill)."""
    with tenant_scope(conversation.tenant_id):
        ids = list(
            Message.objects.filter(conversation_id=conversation.pk)
            .order_by("seq")
            .values_list("pk", flat=True)
        )
        legacy, foreign = ids[2:6], ids[7:10]
        Message.objects.filter(pk__in=legacy).update(token_count=None, token_counter="")
        Message.objects.filter(pk__in=foreign).update(token_count=1, token_counter="cl100k_base")
        Conversation.objects.filter(pk=conversation.pk).update(
            history_tokens=expected_history(conversation)
        )
    return legacy, foreign


def expected_history(conversation) -> int:
    with tenant_scope(conversation.tenant_id):
        agg = Message.objects.filter(
            conversation_id=conversation.pk, token_count__isnull=False
        ).aggregate(total=Sum("token_count"), n=Count("pk"))
    return (agg["total"] or 0) + agg["n"] * O200K.message_overhead


def ask(conversation, user, text):
    message, _ = message_create(conversation=conversation, role="user", content=text, author=user)
    return message


def counts(ids):
    return dict(Message.objects.filter(pk__in=ids).values_list("pk", "token_counter"))


def test_turn_queues_its_on_the_fly_counts_after_commit(
    chat, member_a, recount_runs, django_capture_on_commit_callbacks
):
    legacy, foreign = break_counts(chat)
    question = ask(chat, member_a, "What was the budget again?")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        turn_prepare(chat.tenant_id, question.pk)
    assert not recount_runs  # nothing is sent before the commit
    for callback in callbacks:
        callback()

    assert recount_runs == [(chat.tenant_id, chat.pk, sorted(legacy + foreign))]
    with tenant_scope(chat.tenant_id):
        assert set(counts(legacy + foreign).values()) == {O200K.name}
        for message in Message.objects.filter(pk__in=legacy + foreign):
            assert message.token_count == O200K.count(message.content)
        stored = Conversation.objects.get(pk=chat.pk).history_tokens
    assert stored == expected_history(chat)


def test_one_task_per_conversation_per_window(
    chat, member_a, recount_runs, django_capture_on_commit_callbacks
):
    legacy, _foreign = break_counts(chat)
    with django_capture_on_commit_callbacks(execute=True):
        turn_prepare(chat.tenant_id, ask(chat, member_a, "First?").pk)
    assert len(recount_runs) == 1

    break_counts(chat)  # broken again (e.g. another import) within the window
    with django_capture_on_commit_callbacks(execute=True):
        turn_prepare(chat.tenant_id, ask(chat, member_a, "Second?").pk)
    assert len(recount_runs) == 1  # deduplicated: the window is claimed
    with tenant_scope(chat.tenant_id):
        assert Message.objects.filter(pk__in=legacy, token_count__isnull=True).count() == 4


def test_counted_history_queues_nothing(
    chat, member_a, recount_runs, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        turn_prepare(chat.tenant_id, ask(chat, member_a, "Anything?").pk)
    assert not recount_runs
    assert not [c for c in callbacks if getattr(c, "__qualname__", "").startswith("recount")]


def test_recount_is_idempotent_and_stays_in_its_conversation(chat, tenant_a, member_a):
    legacy, foreign = break_counts(chat)
    other = conversation_create(tenant=tenant_a, created_by=member_a, title="Other")
    stranger = ask(other, member_a, "not this one")
    with tenant_scope(tenant_a):
        Message.objects.filter(pk=stranger.pk).update(token_count=None, token_counter="")

    first = backfill_messages(tenant_a.pk, chat.pk, [*legacy, *foreign, stranger.pk])
    second = backfill_messages(tenant_a.pk, chat.pk, [*legacy, *foreign, stranger.pk])
    assert (first.updated, second.updated) == (7, 0)
    with tenant_scope(tenant_a):
        assert expected_history(chat) == Conversation.objects.get(pk=chat.pk).history_tokens
        assert Message.objects.get(pk=stranger.pk).token_count is None
    # Another tenant's ids find nothing.
    assert backfill_messages(tenant_a.pk + 1_000, chat.pk, legacy).updated == 0
