"""Storing a client's history in bulk (``chats.services.transcripts.transcript_import``): the
state it leaves is the one the messages stored one by one (``message_create``) leave."""

from __future__ import annotations

from typing import Any

import pytest

from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.retrieval import build_query, search_messages
from chats.retrieval.dense import missing_messages
from chats.services import MessageRejected, message_create, transcripts
from chats.services.transcripts import transcript_import
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db

#: An assistant turn first (it answers nothing), then alternating turns in several languages.
HISTORY = [
    ("assistant", "Welcome back! What shall we plan today?"),
    ("user", "Мы договорились перенести релиз на четверг, если тесты будут зелёными."),
    ("assistant", "Noted: the release moves to Thursday if the tests are green."),
    ("user", "次の会議では新しいデザインについて話し合いましょう。"),
    ("assistant", "Sure, the new design is on the next meeting's agenda."),
    ("user", "The latency p95 went from 180 ms to 95 ms after the index change."),
    ("assistant", "A fine gain: the index change halved the p95 latency."),
    ("user", "Remind me of the second quarter budget?"),
]


def one_by_one(conversation: Conversation, user: Any, turns: list[tuple[str, str]]) -> None:
    """The turns stored through the platform's single-message path, as the import stores
    them: a user turn as ``user``'s, an assistant turn as the reply to the user turn before."""
    previous = None
    for role, text in turns:
        message, _ = message_create(
            conversation=conversation,
            role=role,
            content=text,
            author=user if role == "user" else None,
            answers=previous if role == "assistant" else None,
        )
        previous = message if role == "user" else None


def state(conversation: Conversation) -> dict[str, Any]:
    """What the conversation holds, in terms that do not depend on row ids."""
    with tenant_scope(conversation.tenant_id):
        conversation.refresh_from_db()
        rows = list(Message.objects.filter(conversation=conversation).order_by("seq"))
        seq_of = {row.pk: row.seq for row in rows}
        hits = search_messages(
            tenant_id=conversation.tenant_id,
            conversation_id=conversation.pk,
            query=build_query("release tests design latency"),
            limit=10,
        )
        unembedded = missing_messages(conversation.tenant_id, conversation.pk, limit=100)
    return {
        "counters": (
            conversation.last_seq,
            conversation.message_count,
            conversation.history_tokens,
        ),
        "rows": [
            (
                row.seq,
                row.role,
                row.content,
                row.author_id,
                seq_of[row.answers_id] if row.answers_id else None,
                row.status,
                row.token_count,
                row.token_counter,
                row.client_id,
            )
            for row in rows
        ],
        "search": sorted((seq_of[hit.message_id], round(hit.score, 6)) for hit in hits),
        "unembedded": sorted(row["seq"] for row in unembedded),
    }


def test_the_bulk_import_leaves_what_one_by_one_stores_leave(
    tenant_a, member_a, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(transcripts, "IMPORT_BATCH", 3)  # several batches of each kind
    single = make_conversation(tenant_a, member_a, title="single")
    bulk = make_conversation(tenant_a, member_a, title="bulk")
    for conversation in (single, bulk):  # both continue an existing history
        one_by_one(conversation, member_a, [("user", "Hello"), ("assistant", "Hi there.")])

    with django_capture_on_commit_callbacks() as single_jobs:
        one_by_one(single, member_a, HISTORY)
    with django_capture_on_commit_callbacks() as bulk_jobs:
        stored = transcript_import(bulk, member_a, HISTORY)

    assert len(bulk_jobs) == len(single_jobs)  # the jobs come after the reply, on both paths
    expected = state(single)
    assert state(bulk) == expected
    assert expected["counters"][0] == len(HISTORY) + 2
    assert expected["search"] and expected["unembedded"]  # indexed, awaiting their vectors
    assert [m.seq for m in stored] == list(range(3, len(HISTORY) + 3))
    assert all(m.pk is not None for m in stored)
    assert stored[2].answers_id == stored[1].pk and stored[0].answers_id is None


def test_a_refused_turn_stores_nothing(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    with pytest.raises(MessageRejected):
        transcript_import(conversation, member_a, [*HISTORY[:3], ("user", "   ")])
    with tenant_scope(tenant_a):
        conversation.refresh_from_db()
        assert not Message.objects.filter(conversation=conversation).exists()
    assert (conversation.last_seq, conversation.message_count, conversation.history_tokens) == (
        0,
        0,
        0,
    )
