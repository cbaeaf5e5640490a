"""The single-statement message writes of the reply pipeline (PostgreSQL), against the ORM."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from chatplatform.models.conversations import Conversation, Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import message_create
from chats.services.message_rows import (
    finish_reply_row,
    insert_message_row,
    insert_reply_with_record,
    message_for_reply,
)
from chats.services.messages import message_fields

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
]


def _fields(conversation, author, **overrides):
    options: dict[str, Any] = dict(
        role="user", content="hello", status="complete", token_count=3, token_counter="o200k_base"
    )
    options.update(overrides)
    return message_fields(
        conversation, options.pop("role"), options.pop("content"), author=author, **options
    )


def _question(conversation, author):
    message, _ = message_create(conversation=conversation, role="user", content="q", author=author)
    return message


def _streaming_reply(conversation, question):
    reply, _ = message_create(
        conversation=conversation,
        role="assistant",
        content="",
        answers=question,
        status="streaming",
    )
    return reply


def _record(conversation, question, **extra):
    """An unsaved record of the turn answering ``question``."""
    return TurnRecord(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        user_message=question,
        strategy="sliding_window",
        counter="o200k_base",
        budget_tokens=100,
        prompt_tokens_estimated=30,
        hypothetical_tokens=30,
        **extra,
    )


USAGE_FIELDS = (
    "assistant_message_id",
    "time_to_first_token_ms",
    "duration_ms",
    "prompt_tokens_reported",
    "completion_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "full_history_cost_usd",
)


def _finish(tenant_id, reply, question, **overrides):
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
        turn=dict.fromkeys(USAGE_FIELDS, 0),
        now=timezone.now(),
    )
    arguments.update(overrides)
    return finish_reply_row(**arguments)


def _conversation(conversation):
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def test_insert_matches_what_the_orm_stores(conversation, member_a):
    with tenant_scope(conversation.tenant_id):
        inserted = insert_message_row(
            _fields(conversation, member_a, client_id="c1"), 7, timezone.now()
        )
        stored = Message.objects.get(pk=inserted.pk)
    assert (stored.seq, stored.content, stored.client_id, stored.author_id) == (
        1,
        "hello",
        "c1",
        member_a.pk,
    )
    assert (inserted.seq, inserted.created_at) == (stored.seq, stored.created_at)
    assert not inserted._state.adding
    after = _conversation(conversation)
    assert (after.last_seq, after.message_count, after.history_tokens) == (1, 1, 7)


def test_a_duplicate_changes_nothing(conversation, member_a):
    fields = _fields(conversation, member_a, client_id="same")
    insert_message_row(fields, 5, timezone.now())
    with pytest.raises(IntegrityError):
        insert_message_row(fields, 5, timezone.now())
    after = _conversation(conversation)
    assert (after.last_seq, after.message_count, after.history_tokens) == (1, 1, 5)
    # and through the service: the first message again, not created
    first, created = message_create(
        conversation=conversation, role="user", content="other", author=member_a, client_id="same"
    )
    assert not created and first.content == "hello"


def test_a_duplicate_in_the_callers_transaction_raises(conversation, member_a):
    user_message = _question(conversation, member_a)
    message_create(conversation=conversation, role="assistant", content="", answers=user_message)
    with pytest.raises(IntegrityError), transaction.atomic():
        message_create(
            conversation=conversation,
            role="assistant",
            content="",
            answers=user_message,
            validate=False,
            in_caller_transaction=True,
        )
    assert _conversation(conversation).last_seq == 2


def test_message_for_reply_loads_conversation_author_and_reply(
    conversation, member_a, django_assert_num_queries
):
    user_message = _question(conversation, member_a)
    found = message_for_reply(conversation.tenant_id, user_message.pk)
    assert found is not None
    message, reply_id, status = found
    assert (message.pk, message.content, reply_id, status) == (user_message.pk, "q", None, "")
    with django_assert_num_queries(0):
        assert message.conversation.pk == conversation.pk
        assert message.author is not None and message.author.username == member_a.username
    reply = _streaming_reply(conversation, user_message)
    assert (message_for_reply(conversation.tenant_id, user_message.pk) or ())[1:] == (
        reply.pk,
        "streaming",
    )


def test_message_for_reply_is_tenant_scoped(conversation, member_a, tenant_b):
    user_message = _question(conversation, member_a)
    assert message_for_reply(tenant_b.pk, user_message.pk) is None


def test_finish_reply_row_writes_reply_total_and_record_together(conversation, member_a):
    user_message = _question(conversation, member_a)
    reply = _streaming_reply(conversation, user_message)
    with tenant_scope(conversation.tenant_id):
        _record(conversation, user_message).save()
    before = _conversation(conversation).history_tokens
    usage = dict(
        assistant_message_id=reply.pk,
        time_to_first_token_ms=5,
        duration_ms=9,
        prompt_tokens_reported=40,
        completion_tokens=2,
        cache_read_tokens=0,
        cache_write_tokens=0,
        cost_usd=0,
        full_history_cost_usd=Decimal("0.25"),
    )
    assert _finish(conversation.tenant_id, reply, user_message, turn=usage)
    with tenant_scope(conversation.tenant_id):
        stored = Message.objects.get(pk=reply.pk)
        record = TurnRecord.objects.get(user_message=user_message)
    assert (stored.content, stored.status, stored.token_count) == ("done", "complete", 1)
    assert (record.completion_tokens, record.duration_ms) == (2, 9)
    assert record.full_history_cost_usd == Decimal("0.25")
    assert _conversation(conversation).history_tokens == before + 5


def test_finish_reply_row_of_another_tenant_changes_nothing(conversation, member_a, tenant_b):
    user_message = _question(conversation, member_a)
    reply = _streaming_reply(conversation, user_message)
    before = _conversation(conversation).history_tokens
    recorded = _finish(tenant_b.pk, reply, user_message, content="stolen", token_counter="x")
    assert not recorded
    with tenant_scope(conversation.tenant_id):
        assert Message.objects.get(pk=reply.pk).status == "streaming"
    assert _conversation(conversation).history_tokens == before


def test_reply_and_turn_record_in_one_statement(conversation, member_a):
    user_message = _question(conversation, member_a)

    def attempt():
        record = _record(conversation, user_message, sections={"sections": []})
        fields = _fields(
            conversation,
            None,
            role="assistant",
            content="",
            answers=user_message,
            status="streaming",
            token_count=None,
            token_counter="",
        )
        with tenant_scope(conversation.tenant_id):
            return insert_reply_with_record(fields, record, timezone.now()), record

    reply, record = attempt()
    with tenant_scope(conversation.tenant_id):
        stored = TurnRecord.objects.get(pk=record.pk)
        assert Message.objects.get(pk=reply.pk).status == "streaming"
    assert stored.assistant_message_id == reply.pk == record.assistant_message_id
    assert stored.sections == {"sections": []} and reply.seq == 2
    with pytest.raises(IntegrityError):
        attempt()  # one reply per message: nothing of the second attempt stays
    with tenant_scope(conversation.tenant_id):
        assert TurnRecord.objects.filter(user_message=user_message).count() == 1
    assert _conversation(conversation).last_seq == 2
