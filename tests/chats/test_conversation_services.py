"""Conversation services shared by the web UI and the REST API: rename, archive and restore,
delete (its creator or a tenant admin only), leave, the "new chat" that reuses an empty one,
and the title made from the first exchange."""

from __future__ import annotations

import pytest

from chatplatform.models.conversations import Conversation, Message, Participant, Status
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import participant_add
from chats.services.conversations import (
    ConversationRejected,
    conversation_archive,
    conversation_delete,
    conversation_leave,
    conversation_rename,
    conversation_start,
    conversation_unarchive,
)
from chats.services.titles import (
    conversation_title_from_first_exchange,
    title_from_exchange,
    title_from_text,
)
from tests.factories import make_conversation, make_member, make_message

pytestmark = pytest.mark.django_db


def fresh(conversation: Conversation) -> Conversation:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def exists(conversation: Conversation) -> bool:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.filter(pk=conversation.pk).exists()


def test_rename_keeps_one_line_of_at_most_200_characters(conversation_a):
    conversation_rename(conversation_a, title="  Trip\n to   Lisbon ")
    assert fresh(conversation_a).title == "Trip to Lisbon"
    conversation_rename(conversation_a, title="x" * 500)
    assert fresh(conversation_a).title == "x" * 200


def test_archive_is_idempotent_and_unarchive_restores(conversation_a):
    first = conversation_archive(conversation_a).archived_at
    assert first is not None
    assert conversation_archive(fresh(conversation_a)).archived_at == first
    assert fresh(conversation_a).archived_at == first
    conversation_unarchive(conversation_a)
    assert fresh(conversation_a).archived_at is None


def test_only_the_creator_or_a_tenant_admin_deletes(tenant_a, member_a, admin_a):
    colleague = make_member(tenant_a, username="colleague")
    conversation = make_conversation(tenant_a, member_a, title="Shared")
    participant_add(conversation=conversation, user=colleague)
    make_message(conversation, "hello", author=member_a)
    with pytest.raises(ConversationRejected) as refused:
        conversation_delete(conversation, by=colleague, admin=False)
    assert refused.value.code == "forbidden"
    assert exists(conversation)
    conversation_delete(conversation, by=admin_a, admin=True)
    assert not exists(conversation)
    mine = make_conversation(tenant_a, member_a, title="Mine")
    conversation_delete(mine, by=member_a)
    assert not exists(mine)
    with tenant_scope(tenant_a):
        assert not Message.objects.filter(conversation_id=conversation.pk).exists()


def test_leaving_keeps_the_conversation_for_the_others_until_the_last_one_leaves(
    tenant_a, member_a
):
    colleague = make_member(tenant_a, username="colleague")
    conversation = make_conversation(tenant_a, member_a, title="Shared")
    participant_add(conversation=conversation, user=colleague)
    assert conversation_leave(conversation, user=colleague) is False
    with tenant_scope(tenant_a):
        users = set(
            Participant.objects.filter(conversation_id=conversation.pk).values_list(
                "user_id", flat=True
            )
        )
    assert users == {member_a.pk}
    assert conversation_leave(conversation, user=member_a) is True
    assert not exists(conversation)


def test_new_chat_reuses_the_users_empty_conversation(tenant_a, member_a):
    first = conversation_start(tenant=tenant_a, user=member_a)
    assert first.title == "" and first.created_by_id == member_a.pk
    assert conversation_start(tenant=tenant_a, user=member_a).pk == first.pk
    make_message(first, "now it has a message", author=member_a)
    second = conversation_start(tenant=tenant_a, user=member_a)
    assert second.pk != first.pk
    other = make_member(tenant_a, username="other")
    assert conversation_start(tenant=tenant_a, user=other).pk not in (first.pk, second.pk)


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("How do I bake sourdough bread? I tried twice.", "How do I bake sourdough bread?"),
        ("## Plan **my** trip to [Lisbon](https://example.com)\nmore", "Plan my trip to Lisbon"),
        ("```\ncode only first\n```\n- Fix the `login` bug", "Fix the login bug"),
        ("   \n\n> Quote this line.", "Quote this line"),
        (
            "Please summarise the quarterly report for the board meeting next Tuesday morning",
            "Please summarise the quarterly report for the board meeting…",
        ),
        ("a" * 90, "a" * 59 + "…"),
        ("!!! ???", ""),
        ("Zdravo\x00 svete\x07", "Zdravo svete"),
    ],
)
def test_title_from_text(text, title):
    made = title_from_text(text)
    assert made == title
    assert len(made) <= 60


def test_the_reply_names_a_message_without_words():
    assert title_from_exchange("", "Here is a description of your photo. It shows") == (
        "Here is a description of your photo"
    )
    assert title_from_exchange("Weekend plans", "Sure.") == "Weekend plans"


def untitled_with_exchange(tenant, user, text="What is the capital of Peru? Thanks"):
    conversation = make_conversation(tenant, user, title="")
    question = make_message(conversation, text, author=user)
    make_message(conversation, "Lima.", role="assistant", answers=question)
    return conversation


def test_the_first_exchange_names_an_untitled_conversation_once(tenant_a, member_a):
    conversation = untitled_with_exchange(tenant_a, member_a)
    updated_at = fresh(conversation).updated_at
    assert conversation_title_from_first_exchange(conversation) == "What is the capital of Peru?"
    stored = fresh(conversation)
    assert stored.title == "What is the capital of Peru?"
    assert stored.updated_at == updated_at  # naming it is not activity
    assert conversation_title_from_first_exchange(conversation) is None  # idempotent


def test_a_title_the_user_set_is_never_overwritten(tenant_a, member_a):
    conversation = untitled_with_exchange(tenant_a, member_a)
    conversation_rename(fresh(conversation), title="My own title")
    assert conversation_title_from_first_exchange(conversation) is None
    assert fresh(conversation).title == "My own title"


def test_no_title_before_a_complete_reply(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a, title="")
    question = make_message(conversation, "Hello there", author=member_a)
    assert conversation_title_from_first_exchange(conversation) is None
    make_message(conversation, "", role="assistant", answers=question, status=Status.FAILED)
    assert conversation_title_from_first_exchange(conversation) is None
    assert fresh(conversation).title == ""
