"""Regenerating the last reply and editing the last user message (chats.services.revisions):
the versions replaced are kept as revisions, the message row holds the current one, tokens and
vectors follow, and only the last exchange changes, by the right person, when no reply streams."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageEmbedding,
    MessageRevision,
    Status,
)
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies.turns import waiting_messages
from chats.services import participant_add
from chats.services.messages import MessageRejected
from chats.services.revisions import RevisionRefused, reply_regenerate, user_message_edit
from tests.factories import make_member, make_message

pytestmark = pytest.mark.django_db


def exchange(conversation, author, text="What is the capital of France?", answer="Paris."):
    question = make_message(conversation, text, author=author)
    reply = make_message(conversation, answer, role="assistant", answers=question)
    return question, reply


def history_tokens(conversation) -> int:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk).history_tokens


def fresh(message) -> Message:
    with tenant_scope(message.tenant_id):
        return Message.objects.get(pk=message.pk)


def revisions(message) -> list[MessageRevision]:
    with tenant_scope(message.tenant_id):
        return list(MessageRevision.objects.filter(message=message))


def test_regenerate_keeps_the_old_reply_as_a_revision_and_queues_its_message(
    conversation, member_a
):
    question, reply = exchange(conversation, member_a)
    before = history_tokens(conversation)
    reply_regenerate(conversation=conversation, user=member_a, reply_id=reply.pk)
    stored = fresh(reply)
    assert stored.status == Status.FAILED and stored.content == "" and stored.token_count is None
    [kept] = revisions(reply)
    assert (kept.reason, kept.content, kept.status) == ("regenerated", "Paris.", "complete")
    assert kept.revised_by == member_a and kept.token_count == reply.token_count
    # The old reply's tokens leave the history total; its message waits for a new reply.
    assert history_tokens(conversation) < before
    assert waiting_messages(conversation.tenant_id, conversation.pk) == [question.pk]


def test_edit_stores_the_new_text_keeps_the_old_and_recounts(conversation, member_a):
    question, reply = exchange(conversation, member_a, text="short")
    with tenant_scope(conversation.tenant_id):
        MessageEmbedding.objects.create(
            tenant_id=conversation.tenant_id,
            conversation=conversation,
            message=question,
            seq=question.seq,
            model="test",
            vector=b"\x00" * 8,
        )
    before = history_tokens(conversation)
    longer = "a much longer question about the rivers and the mountains of France " * 3
    user_message_edit(
        conversation=conversation, user=member_a, message_id=question.pk, content=longer
    )
    stored = fresh(question)
    assert stored.content == longer and stored.edited_at is not None
    assert stored.token_count > question.token_count
    [edited] = revisions(question)
    assert (edited.reason, edited.content) == ("edited", "short")
    [superseded] = revisions(reply)
    assert (superseded.reason, superseded.content) == ("resent", "Paris.")
    assert fresh(reply).status == Status.FAILED
    # The vectors of the old text go (the embedding job writes new ones after the reply).
    with tenant_scope(conversation.tenant_id):
        assert not MessageEmbedding.objects.filter(message=question).exists()
    expected = before + (stored.token_count - question.token_count) - (reply.token_count + 4)
    assert history_tokens(conversation) == expected
    assert waiting_messages(conversation.tenant_id, conversation.pk) == [question.pk]


def test_only_the_last_exchange_changes(conversation, member_a):
    first_question, first_reply = exchange(conversation, member_a)
    exchange(conversation, member_a, text="And of Spain?", answer="Madrid.")
    with pytest.raises(RevisionRefused) as refused:
        reply_regenerate(conversation=conversation, user=member_a, reply_id=first_reply.pk)
    assert refused.value.code == "not_last"
    with pytest.raises(RevisionRefused) as refused:
        user_message_edit(
            conversation=conversation, user=member_a, message_id=first_question.pk, content="x"
        )
    assert refused.value.code == "not_last"
    assert revisions(first_reply) == [] and fresh(first_question).edited_at is None


def test_only_the_author_edits_and_the_author_or_an_admin_regenerates(
    conversation, member_a, tenant_a, admin_a
):
    other = make_member(tenant_a, username="other-member")
    participant_add(conversation=conversation, user=other)
    question, reply = exchange(conversation, member_a)
    with pytest.raises(RevisionRefused) as refused:
        user_message_edit(
            conversation=conversation, user=other, message_id=question.pk, content="x"
        )
    assert refused.value.code == "forbidden"
    assert fresh(question).content == question.content
    with pytest.raises(RevisionRefused) as refused:
        reply_regenerate(conversation=conversation, user=other, reply_id=reply.pk)
    assert refused.value.code == "forbidden"
    assert revisions(reply) == [] and fresh(reply).status == reply.status
    participant_add(conversation=conversation, user=admin_a)
    reply_regenerate(conversation=conversation, user=admin_a, reply_id=reply.pk)
    assert revisions(reply)[0].revised_by == admin_a


def test_not_while_the_reply_is_streaming(conversation, member_a):
    question = make_message(conversation, "Tell me a story", author=member_a)
    reply = make_message(
        conversation, "", role="assistant", answers=question, status=Status.STREAMING
    )
    for change in (
        lambda: reply_regenerate(conversation=conversation, user=member_a, reply_id=reply.pk),
        lambda: user_message_edit(
            conversation=conversation, user=member_a, message_id=question.pk, content="Shorter"
        ),
    ):
        with pytest.raises(RevisionRefused) as refused:
            change()
        assert refused.value.code == "busy"
    assert fresh(reply).status == Status.STREAMING and revisions(question) == []


def test_another_conversations_or_tenants_message_is_not_found(
    conversation, conversation_b, member_a, member_b
):
    exchange(conversation, member_a)
    _, their_reply = exchange(conversation_b, member_b)
    for reply_id in (their_reply.pk, 10**9, "abc", None):
        with pytest.raises(RevisionRefused) as refused:
            reply_regenerate(conversation=conversation, user=member_a, reply_id=reply_id)
        assert refused.value.code == "not_found"
    assert revisions(their_reply) == []


def test_bad_text_is_refused_and_nothing_changes(conversation, member_a):
    question, reply = exchange(conversation, member_a)
    for content in ("   ", None, "x" * 70000):
        with pytest.raises(MessageRejected):
            user_message_edit(
                conversation=conversation, user=member_a, message_id=question.pk, content=content
            )
    assert fresh(question).content == question.content and fresh(question).edited_at is None
    assert fresh(reply).status == Status.COMPLETE and revisions(reply) == []


def test_the_admin_shows_a_messages_earlier_versions(client, admin_a, conversation, member_a):
    question, _ = exchange(conversation, member_a, text="The first wording")
    user_message_edit(
        conversation=conversation, user=member_a, message_id=question.pk, content="Reworded"
    )
    client.force_login(admin_a)
    page = client.get(reverse("admin:chatplatform_message_change", args=[question.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "The first wording" in html and "Edited by its author" in html
