"""The hot writes of the reply path: one contract, both implementations.

Every test runs against the ORM implementation and the single-statement PostgreSQL one, on
whichever database the suite runs on (the PostgreSQL one is skipped elsewhere). Each asserts
the same rows, counters and errors for both, so on PostgreSQL the two are proven equal, and
the ORM one correct there too.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from chatplatform.models.conversations import Conversation, Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create, message_create
from chats.services.hot_writes import HotWrites, OrmHotWrites, PostgresHotWrites, hot_writes
from chats.services.hot_writes.postgres import USAGE_FIELDS
from chats.services.messages import message_fields

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(
    params=[
        pytest.param(OrmHotWrites(), id="orm"),
        pytest.param(PostgresHotWrites(), id="postgres", marks=pytest.mark.postgres),
    ]
)
def writes(request: pytest.FixtureRequest) -> HotWrites:
    return request.param


@pytest.fixture
def conversation(tenant_a, member_a):
    return conversation_create(tenant=tenant_a, created_by=member_a, title="rows")


@pytest.fixture
def now():
    # Not the wall clock, so a stored time shows which write set it.
    return timezone.now().replace(microsecond=0) - timedelta(days=1)


def _fields(conversation, author, **overrides) -> dict[str, Any]:
    options: dict[str, Any] = dict(
        role="user", content="hello", status="complete", token_count=3, token_counter="o200k_base"
    )
    options.update(overrides)
    return message_fields(
        conversation, options.pop("role"), options.pop("content"), author=author, **options
    )


def _reply_fields(conversation, question) -> dict[str, Any]:
    return _fields(
        conversation,
        None,
        role="assistant",
        content="",
        answers=question,
        status="streaming",
        token_count=None,
        token_counter="",
    )


def _question(conversation, author) -> Message:
    message, _ = message_create(conversation=conversation, role="user", content="q", author=author)
    return message


def _record(conversation, question) -> TurnRecord:
    """An unsaved record of the turn answering ``question``."""
    return TurnRecord(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        user_message=question,
        strategy="sliding_window",
        counter="o200k_base",
        budget_tokens=100,
        sections={"sections": []},
        prompt_tokens_estimated=30,
        hypothetical_tokens=30,
    )


def _counters(conversation) -> tuple[int, int, int]:
    with tenant_scope(conversation.tenant_id):
        after = Conversation.objects.get(pk=conversation.pk)
    return after.last_seq, after.message_count, after.history_tokens


def _stored(message) -> Message:
    with tenant_scope(message.tenant_id):
        return Message.objects.get(pk=message.pk)


# The user message with its conversation's counters


def test_message_insert_stores_the_row_and_counts_it(writes, conversation, member_a, now):
    fields = _fields(conversation, member_a, client_id="c1")
    with tenant_scope(conversation.tenant_id):
        inserted = writes.message_insert(fields, 7, now)
    stored = _stored(inserted)
    assert (stored.seq, stored.role, stored.content, stored.client_id, stored.author_id) == (
        1,
        "user",
        "hello",
        "c1",
        member_a.pk,
    )
    assert (stored.status, stored.token_count, stored.token_counter) == (
        "complete",
        3,
        "o200k_base",
    )
    assert (stored.error_code, stored.attachment_type, stored.attachment_bytes) == ("", "", None)
    assert (inserted.seq, inserted.created_at) == (stored.seq, stored.created_at)
    assert not inserted._state.adding
    assert _counters(conversation) == (1, 1, 7)
    with tenant_scope(conversation.tenant_id):
        assert Conversation.objects.get(pk=conversation.pk).updated_at == now


def test_a_duplicate_changes_nothing_and_leaves_the_callers_transaction_usable(
    writes, conversation, member_a, now
):
    fields = _fields(conversation, member_a, client_id="same")
    with tenant_scope(conversation.tenant_id):
        writes.message_insert(fields, 5, now)
        with pytest.raises(IntegrityError):
            writes.message_insert(fields, 5, now)
        with transaction.atomic():
            with pytest.raises(IntegrityError):
                writes.message_insert(fields, 5, now)
            # The failed insert rolled back to its savepoint: the transaction goes on.
            writes.message_insert(_fields(conversation, member_a, client_id="next"), 2, now)
    assert _counters(conversation) == (2, 2, 7)


def test_a_duplicate_in_the_callers_transaction_raises_and_rolls_it_back(
    writes, conversation, member_a, now
):
    fields = _fields(conversation, member_a, client_id="same")
    with tenant_scope(conversation.tenant_id):
        writes.message_insert(fields, 5, now)
        with pytest.raises(IntegrityError), transaction.atomic():
            writes.message_insert(
                _fields(conversation, member_a, client_id="other"), 1, now, own_transaction=False
            )
            writes.message_insert(fields, 5, now, own_transaction=False)
    assert _counters(conversation) == (1, 1, 5)


def test_a_message_of_a_missing_conversation_is_not_stored(writes, conversation, member_a, now):
    gone = Conversation(pk=conversation.pk + 1000, tenant_id=conversation.tenant_id)
    with tenant_scope(conversation.tenant_id):
        with pytest.raises(Conversation.DoesNotExist):
            writes.message_insert(_fields(gone, member_a), 5, now)
        question = _question(conversation, member_a)
        with pytest.raises(Conversation.DoesNotExist):
            writes.reply_insert_with_record(
                _reply_fields(gone, question), _record(gone, question), now
            )
        assert not Message.objects.filter(conversation_id=gone.pk).exists()
        assert not TurnRecord.objects.filter(user_message=question).exists()


# The reply row with the record of its turn


def test_reply_and_turn_record_are_stored_together_once(writes, conversation, member_a, now):
    question = _question(conversation, member_a)
    before = _counters(conversation)
    record = _record(conversation, question)
    with tenant_scope(conversation.tenant_id):
        reply = writes.reply_insert_with_record(_reply_fields(conversation, question), record, now)
        stored_record = TurnRecord.objects.get(pk=record.pk)
    stored = _stored(reply)
    assert (stored.seq, stored.role, stored.status, stored.answers_id) == (
        2,
        "assistant",
        "streaming",
        question.pk,
    )
    assert (stored.token_count, stored.token_counter, stored.content) == (None, "", "")
    assert reply.seq == 2 and not reply._state.adding and not record._state.adding
    assert stored_record.assistant_message_id == reply.pk == record.assistant_message_id
    assert stored_record.sections == {"sections": []} and stored_record.budget_tokens == 100
    # A streaming reply counts as a message; its tokens come with the finish.
    assert _counters(conversation) == (before[0] + 1, before[1] + 1, before[2])

    with tenant_scope(conversation.tenant_id):
        with pytest.raises(IntegrityError):  # one reply per message: nothing of it stays
            writes.reply_insert_with_record(
                _reply_fields(conversation, question), _record(conversation, question), now
            )
        assert TurnRecord.objects.filter(user_message=question).count() == 1
        assert Message.objects.filter(answers=question).count() == 1
    assert _counters(conversation) == (before[0] + 1, before[1] + 1, before[2])


# The reply's finish with the conversation's total and the turn's usage


def _usage(reply, **overrides) -> dict[str, Any]:
    usage: dict[str, Any] = dict.fromkeys(USAGE_FIELDS, 0)
    usage.update(assistant_message_id=reply.pk, **overrides)
    return usage


def _finish(writes, tenant_id, reply, question, now, **overrides) -> bool:
    arguments: dict[str, Any] = dict(
        tenant_id=tenant_id,
        message_id=reply.pk,
        user_message_id=question.pk,
        content="done",
        status="complete",
        token_count=1,
        token_counter="o200k_base",
        tokens_added=5,
        error_code="",
        error_message="",
        turn=_usage(reply),
        now=now,
    )
    arguments.update(overrides)
    with tenant_scope(tenant_id):
        return writes.reply_finish(**arguments)


def _streaming_turn(conversation, member_a, now) -> tuple[Message, Message]:
    question = _question(conversation, member_a)
    with tenant_scope(conversation.tenant_id):
        reply = hot_writes().reply_insert_with_record(
            _reply_fields(conversation, question), _record(conversation, question), now
        )
    return question, reply


def test_finish_writes_reply_total_and_usage_together(writes, conversation, member_a, now):
    question, reply = _streaming_turn(conversation, member_a, now)
    before = _counters(conversation)
    usage = _usage(
        reply,
        time_to_first_token_ms=5,
        duration_ms=9,
        prompt_tokens_reported=40,
        completion_tokens=2,
        cache_read_tokens=3,
        cache_write_tokens=4,
        cost_usd=Decimal("0.000125"),
        full_history_cost_usd=Decimal("0.25"),
    )
    later = now + timedelta(seconds=30)
    assert _finish(
        writes,
        conversation.tenant_id,
        reply,
        question,
        later,
        status="incomplete",
        error_code="provider_error",
        error_message="cut off",
        turn=usage,
    )
    stored = _stored(reply)
    assert (stored.content, stored.status, stored.token_count, stored.token_counter) == (
        "done",
        "incomplete",
        1,
        "o200k_base",
    )
    assert (stored.error_code, stored.error_message, stored.updated_at) == (
        "provider_error",
        "cut off",
        later,
    )
    with tenant_scope(conversation.tenant_id):
        record = TurnRecord.objects.get(user_message=question)
    assert {name: getattr(record, name) for name in USAGE_FIELDS} == usage
    assert _counters(conversation) == (before[0], before[1], before[2] + 5)


def test_finish_without_a_turn_record_stores_the_reply_and_says_so(
    writes, conversation, member_a, now
):
    question, reply = _streaming_turn(conversation, member_a, now)
    with tenant_scope(conversation.tenant_id):
        TurnRecord.objects.filter(user_message=question).delete()
    before = _counters(conversation)
    assert not _finish(writes, conversation.tenant_id, reply, question, now)
    assert _stored(reply).status == "complete"
    assert _counters(conversation) == (before[0], before[1], before[2] + 5)


def test_finish_of_another_tenants_reply_changes_nothing(
    writes, conversation, member_a, tenant_b, now
):
    question, reply = _streaming_turn(conversation, member_a, now)
    before, usage_before = _counters(conversation), _usage_of(conversation, question)
    assert not _finish(
        writes,
        tenant_b.pk,
        reply,
        question,
        now,
        content="stolen",
        turn=_usage(reply, duration_ms=9),
    )
    stored = _stored(reply)
    assert (stored.status, stored.content, stored.token_count) == ("streaming", "", None)
    assert _usage_of(conversation, question) == usage_before
    assert _counters(conversation) == before


def _usage_of(conversation, question) -> dict[str, Any]:
    with tenant_scope(conversation.tenant_id):
        record = TurnRecord.objects.get(user_message=question)
    return {name: getattr(record, name) for name in USAGE_FIELDS}


# The read the writes depend on


def test_message_for_reply_loads_conversation_author_and_reply(
    writes, conversation, member_a, now, django_assert_num_queries
):
    question = _question(conversation, member_a)
    with tenant_scope(conversation.tenant_id):
        found = writes.message_for_reply(conversation.tenant_id, question.pk)
    assert found is not None
    message, reply_id, status = found
    assert (message.pk, message.content, reply_id, status) == (question.pk, "q", None, "")
    with django_assert_num_queries(0):
        assert message.conversation.pk == conversation.pk
        assert message.conversation.last_seq == 1
        assert message.author is not None and message.author.username == member_a.username
    reply = _streaming_reply(conversation, question)
    with tenant_scope(conversation.tenant_id):
        again = writes.message_for_reply(conversation.tenant_id, question.pk)
    assert again is not None and again[1:] == (reply.pk, "streaming")


def _streaming_reply(conversation, question) -> Message:
    reply, _ = message_create(
        conversation=conversation,
        role="assistant",
        content="",
        answers=question,
        status="streaming",
    )
    return reply


def test_message_for_reply_finds_nothing_of_another_tenant_or_missing(
    writes, conversation, member_a, tenant_b
):
    question = _question(conversation, member_a)
    with tenant_scope(tenant_b.pk):
        assert writes.message_for_reply(tenant_b.pk, question.pk) is None
    with tenant_scope(conversation.tenant_id):
        assert writes.message_for_reply(conversation.tenant_id, question.pk + 1000) is None


# Through the service, on the implementation of the suite's database


def test_the_service_returns_the_first_message_for_a_duplicate(conversation, member_a):
    first, created = message_create(
        conversation=conversation, role="user", content="hello", author=member_a, client_id="same"
    )
    again, created_again = message_create(
        conversation=conversation, role="user", content="other", author=member_a, client_id="same"
    )
    assert created and not created_again
    assert (again.pk, again.content) == (first.pk, "hello")
    assert _counters(conversation)[:2] == (1, 1)


def test_a_duplicate_reply_in_the_callers_transaction_raises(conversation, member_a):
    question = _question(conversation, member_a)
    message_create(conversation=conversation, role="assistant", content="", answers=question)
    with pytest.raises(IntegrityError), transaction.atomic():
        message_create(
            conversation=conversation,
            role="assistant",
            content="",
            answers=question,
            validate=False,
            in_caller_transaction=True,
        )
    assert _counters(conversation)[0] == 2


def test_no_operation_depends_on_the_active_tenant_scope(writes, conversation, member_a, now):
    """The tenant is named in every query: without a scope, a turn's writes and read work."""
    question = writes.message_insert(_fields(conversation, member_a), 4, now)
    reply = writes.reply_insert_with_record(
        _reply_fields(conversation, question), _record(conversation, question), now
    )
    found = writes.message_for_reply(conversation.tenant_id, question.pk)
    assert found is not None and found[1:] == (reply.pk, "streaming")
    assert writes.reply_finish(
        tenant_id=conversation.tenant_id,
        message_id=reply.pk,
        user_message_id=question.pk,
        content="done",
        status="complete",
        token_count=1,
        token_counter="o200k_base",
        tokens_added=5,
        error_code="",
        error_message="",
        turn=_usage(reply),
        now=now,
    )
    assert _counters(conversation) == (2, 2, 9)
