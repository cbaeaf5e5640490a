"""Reads of the chats app. Every selector takes the user (and tenant) it answers for, and
answers None / empty for objects that are missing and for objects that are not theirs alike."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, Exists, OuterRef

from chatplatform.db import row_instances, select_columns
from chatplatform.models import Membership, Tenant
from chatplatform.models.conversations import (
    Conversation,
    ConversationFingerprint,
    Message,
    MessageRevision,
    OpenAIResponse,
    Participant,
)
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

#: Ids above this are not ids of ours (and would overflow a bigint column in a query).
MAX_ID = 2**62


def row_id(value: Any) -> int | None:
    """``value`` (an int, or a string of digits) as an id that can name a row; None for
    anything else (not a whole number, below 1, above :data:`MAX_ID`)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        number = int(value)
    except (ValueError, OverflowError):
        return None
    return number if 0 < number <= MAX_ID else None


def conversation_for_member(
    user: Any, conversation_id: Any, *, tenant_id: int | None = None
) -> Conversation | None:
    """The conversation if ``user`` is a member of its tenant and a participant (and, when
    ``tenant_id`` is given, it belongs to that tenant); else None."""
    conversation_id = row_id(conversation_id)
    if conversation_id is None:
        return None
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    if connection.vendor == "postgresql":
        # One statement without the ORM's query building: it runs on every request that
        # names a conversation (three queries through the ORM, about 3 ms of CPU).
        with connection.cursor() as cursor:
            cursor.execute(_member_conversation_sql(), [conversation_id, user.pk, user.pk])
            row = cursor.fetchone()
        conversation = row_instances(row, Conversation)[0] if row is not None else None
        if conversation is None or (tenant_id is not None and conversation.tenant_id != tenant_id):
            return None
        return conversation
    with all_tenants():
        conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None or (tenant_id is not None and conversation.tenant_id != tenant_id):
        return None
    with tenant_scope(conversation.tenant_id):
        if not Membership.objects.filter(user=user, tenant__is_active=True).exists():
            return None
        if not Participant.objects.filter(conversation=conversation, user=user).exists():
            return None
    return conversation


@functools.cache
def _member_conversation_sql() -> str:
    return (
        f"SELECT {select_columns(Conversation, 'c')} FROM {Conversation._meta.db_table} c "  # noqa: S608
        f"WHERE c.id = %s AND EXISTS (SELECT 1 FROM {Membership._meta.db_table} m "
        f"JOIN {Tenant._meta.db_table} t ON t.id = m.tenant_id WHERE m.tenant_id = c.tenant_id "
        "AND m.user_id = %s AND t.is_active) "
        f"AND EXISTS (SELECT 1 FROM {Participant._meta.db_table} p "
        "WHERE p.tenant_id = c.tenant_id AND p.conversation_id = c.id AND p.user_id = %s)"
    )


def message_with_image(conversation: Conversation, message_id: Any) -> Message | None:
    """The message of ``conversation`` (one the caller may see, resolved by
    :func:`conversation_for_member`) carrying an image; None for a missing id, another
    conversation's message and a message without an image alike."""
    message_id = row_id(message_id)
    if message_id is None:
        return None
    with tenant_scope(conversation.tenant_id):
        return (
            Message.objects.filter(conversation_id=conversation.pk, pk=message_id)
            .exclude(attachment="")
            .exclude(attachment__isnull=True)
            .first()
        )


@dataclass(frozen=True)
class MessageVersion:
    """One version of a message: ``number`` counts from 1 (the first written); the last is
    the current text (``current``), the others were replaced by an edit or a regenerated
    reply (``replaced``: how, ``replaced_at``: when) and are kept read-only."""

    number: int
    content: str
    status: str
    written_at: datetime
    current: bool
    replaced: str = ""
    replaced_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (times in ISO 8601): the chat page's and the REST API's shape."""
        return {
            "number": self.number,
            "content": self.content,
            "status": self.status,
            "written_at": self.written_at.isoformat(),
            "current": self.current,
            "replaced": self.replaced,
            "replaced_at": self.replaced_at.isoformat() if self.replaced_at else None,
        }


def revision_counts(message_ids: list[int]) -> dict[int, int]:
    """How many earlier versions each of ``message_ids`` has (only those with any), in one
    query; the caller runs it in the messages' tenant scope."""
    if not message_ids:
        return {}
    rows = (
        MessageRevision.objects.filter(message_id__in=message_ids)
        .values("message_id")
        .annotate(n=Count("id"))
        .values_list("message_id", "n")
    )
    return dict(rows)


def message_versions(
    user: Any, conversation_id: Any, message_id: Any, *, tenant_id: int | None = None
) -> list[MessageVersion] | None:
    """Every version of a message, the first written first and the current last, for a
    participant of its conversation (see :func:`conversation_for_member`); None for a
    missing message, another conversation's or another tenant's, and a conversation the user
    does not take part in, alike."""
    conversation = conversation_for_member(user, conversation_id, tenant_id=tenant_id)
    message_id = row_id(message_id)
    if conversation is None or message_id is None:
        return None
    with tenant_scope(conversation.tenant_id):
        message = Message.objects.filter(conversation_id=conversation.pk, pk=message_id).first()
        if message is None:
            return None
        revisions = list(
            MessageRevision.objects.filter(message_id=message.pk).order_by("revised_at", "pk")
        )
    versions = [
        MessageVersion(
            number=number,
            content=r.content,
            status=r.status,
            written_at=r.written_at,
            current=False,
            replaced=r.reason,
            replaced_at=r.revised_at,
        )
        for number, r in enumerate(revisions, start=1)
    ]
    versions.append(
        MessageVersion(
            number=len(versions) + 1,
            content=message.content,
            status=message.status,
            written_at=message.edited_at or message.created_at,
            current=True,
        )
    )
    return versions


def message_by_client_id(conversation: Conversation, author: Any, client_id: str) -> Message | None:
    """``author``'s message sent with ``client_id`` in ``conversation``, or None. Client ids
    belong to their sender: another member's message with the same id is not this one."""
    with tenant_scope(conversation.tenant_id):
        return Message.objects.filter(
            conversation_id=conversation.pk,
            author_id=getattr(author, "pk", None),
            client_id=client_id,
        ).first()


#: How many conversations starting with the same message are compared with a resent history.
FINGERPRINT_CANDIDATES = 20


def fingerprint_candidates(
    tenant_id: int, user: Any, first_hash: str
) -> list[ConversationFingerprint]:
    """Where ``user``'s conversations that began with the message hashed ``first_hash`` stand
    (the SDK-compatible API), most recently continued first; one indexed read."""
    with tenant_scope(tenant_id):
        return list(
            ConversationFingerprint.objects.select_related("conversation")
            .filter(user=user, first_hash=first_hash, conversation__archived_at__isnull=True)
            .order_by("-updated_at")[:FINGERPRINT_CANDIDATES]
        )


def messages_after(conversation: Conversation, seq: int, limit: int) -> list[Message]:
    """At most ``limit`` messages of ``conversation`` after ``seq``, oldest first (their
    role, content and status only)."""
    with tenant_scope(conversation.tenant_id):
        return list(
            Message.objects.filter(conversation_id=conversation.pk, seq__gt=seq)
            .order_by("seq")
            .only("id", "seq", "role", "content", "status", "tool_calls", "tool_results")[:limit]
        )


def tool_call_message(conversation: Conversation, call_ids: set[str]) -> Message | None:
    """The newest reply of ``conversation`` that called tools, whose round is one of
    ``call_ids`` (a round is named by its first call's id) and has no results yet."""
    with tenant_scope(conversation.tenant_id):
        answered = Message.objects.filter(
            conversation_id=conversation.pk, role="tool", tool_group=OuterRef("tool_group")
        )
        return (
            Message.objects.filter(
                conversation_id=conversation.pk, role="assistant", tool_group__in=call_ids
            )
            .exclude(Exists(answered))
            .order_by("-seq")
            .only("id", "tool_calls", "tool_group")
            .first()
        )


def openai_response_for(tenant_id: int, user: Any, public_id: Any) -> OpenAIResponse | None:
    """``user``'s stored response (the OpenAI Responses API) named ``public_id`` in the tenant,
    with its conversation; None alike for an unknown id, another tenant's or user's response,
    one made with ``store: false``, and one of a conversation the user has left."""
    user_id = getattr(user, "pk", None)
    if not isinstance(public_id, str) or user_id is None:
        return None
    with tenant_scope(tenant_id):
        found = (
            OpenAIResponse.objects.select_related("conversation")
            .filter(public_id=public_id, user_id=user_id, stored=True)
            .first()
        )
    if found is None or conversation_for_member(user, found.conversation_id, tenant_id=tenant_id):
        return found
    return None  # no longer a participant of its conversation
