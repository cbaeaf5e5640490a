"""Storing messages: validation, idempotency, sequence numbers, token counts."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from chatplatform.core.tokens import get_counter
from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import MessageRejected, conversation_create, message_create

pytestmark = pytest.mark.django_db


def test_message_is_counted_once_and_stored_with_its_counter(conversation, member_a):
    message, created = message_create(
        conversation=conversation, role="user", content="Привет, как дела? 你好", author=member_a
    )
    assert created
    counter = get_counter("o200k_base")  # the offline preset's model uses o200k_base
    assert message.token_count == counter.count("Привет, как дела? 你好")
    assert message.token_counter == "o200k_base"
    with tenant_scope(conversation.tenant_id):
        conversation.refresh_from_db()
    assert conversation.last_seq == 1
    assert conversation.message_count == 1
    assert conversation.history_tokens == message.token_count + counter.message_overhead


def test_sequence_numbers_increase(conversation, member_a):
    seqs = [
        message_create(conversation=conversation, role="user", content=f"m{i}", author=member_a)[
            0
        ].seq
        for i in range(5)
    ]
    assert seqs == [1, 2, 3, 4, 5]


def test_same_client_id_returns_the_first_message(conversation, member_a):
    first, created = message_create(
        conversation=conversation, role="user", content="hello", author=member_a, client_id="c1"
    )
    again, created_again = message_create(
        conversation=conversation, role="user", content="hello", author=member_a, client_id="c1"
    )
    assert created and not created_again
    assert again.pk == first.pk
    with tenant_scope(conversation.tenant_id):
        assert Message.objects.filter(conversation=conversation).count() == 1


def test_one_reply_per_user_message(conversation, member_a):
    question, _ = message_create(conversation=conversation, role="user", content="q")
    reply, created = message_create(
        conversation=conversation, role="assistant", content="a", answers=question
    )
    second, created_again = message_create(
        conversation=conversation, role="assistant", content="b", answers=question
    )
    assert created and not created_again and second.pk == reply.pk


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("a\x00b", "invalid"),
        ("bad \ud800 surrogate", "invalid"),
        ("x" * (64 * 1024 + 1), "too_large"),
        (None, "invalid"),
    ],
)
def test_bad_messages_are_rejected_and_nothing_is_stored(conversation, content, code):
    with pytest.raises(MessageRejected) as info:
        message_create(conversation=conversation, role="user", content=content)
    assert info.value.code == code
    assert info.value.message
    with tenant_scope(conversation.tenant_id):
        assert not Message.objects.filter(conversation=conversation).exists()
        assert Conversation.objects.get(pk=conversation.pk).last_seq == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_yield_one_row(tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    results: list[int] = []
    errors: list[BaseException] = []

    def send() -> None:
        try:
            message, _ = message_create(
                conversation=conversation,
                role="user",
                content="dup",
                author=member_a,
                client_id="same",
            )
            results.append(message.pk)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(results)) == 1
    with tenant_scope(tenant_a):
        assert Message.objects.filter(conversation=conversation).count() == 1
        assert Conversation.objects.get(pk=conversation.pk).last_seq == 1


def test_the_servers_ceiling_caps_a_larger_policy_limit(conversation, member_a, settings):
    # A policy stored before the ceiling was checked (or the operator lowered the setting).
    with tenant_scope(conversation.tenant_id):
        ContextPolicy.objects.filter(pk=conversation.tenant.active_policy_id).update(
            max_message_chars=1024 * 1024
        )
    settings.CHAT_MAX_MESSAGE_CHARS = 1000
    with pytest.raises(MessageRejected) as info:
        message_create(conversation=conversation, role="user", content="x" * 1001, author=member_a)
    assert info.value.code == "too_large" and "the limit is 1,000" in info.value.message
    message, created = message_create(
        conversation=conversation, role="user", content="x" * 1000, author=member_a
    )
    assert created and len(message.content) == 1000
