"""Changing the last exchange of a conversation: regenerating its reply, or editing its user
message and having it answered again (the database side; ``chats.replies.revise`` starts the
new reply and tells the sockets).

What a real product keeps: the version replaced is never deleted. It becomes a
:class:`MessageRevision` (the edited text, or the superseded reply with its turn's usage), which
an audit reads and which never enters a prompt again. The message row holds the current
version, so assembly, retrieval and summaries see only it: the edited text is counted again
with the policy's storage counter (and the conversation's token total follows), its vectors are
dropped (the embedding job writes new ones after the reply), the full-text index follows the
row. The reply row is reused: it is marked failed, which is how the reply queue
(``chats.replies.turns.waiting_messages``) knows to answer its message again. The superseded
reply's turn record stays, marked superseded: the usage reports count what it was billed, and
the message's turn record becomes the new reply's.

Rules: only the conversation's last user message and its reply; only the author edits; only
the author of the message answered or a tenant admin regenerates its reply; never while the
reply is being written. Another tenant's or conversation's message is "not found",
as a missing one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from chatplatform.counting import storage_counter_for
from chatplatform.models import Membership, MembershipRole
from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageEmbedding,
    MessageRevision,
    MessageRole,
    RevisionReason,
    Status,
    TurnRecord,
)
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.selectors import row_id
from chats.services.messages import max_message_chars, validate_message_content
from memory.services import instructions_recapture

logger = logging.getLogger(__name__)

#: What a superseded reply shows until the new one starts streaming.
SUPERSEDED_TEXT = "A new reply is being written."


@dataclass
class RevisionRefused(Exception):
    """The change cannot be made; nothing was changed. ``code`` is machine-readable:
    ``not_found`` (missing, or not this conversation's), ``forbidden`` (another member's
    message), ``not_last`` (not the last exchange), ``busy`` (its reply is being written)."""

    code: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Revised:
    """The exchange after the change: the user message and its reply (failed, waiting to be
    answered again)."""

    user_message: Message
    reply: Message


def reply_regenerate(
    *, conversation: Conversation, user: Any, reply_id: Any, admin: bool = False
) -> Revised:
    """Supersede the reply ``reply_id`` (the conversation's last) so that a new reply to the
    same user message is written: only by the author of that message or a tenant admin
    (``admin``: the caller's credential says so, e.g. an admin API key; else the user's
    membership decides). Raises :class:`RevisionRefused`."""
    with tenant_scope(conversation.tenant_id):
        _must_exist(conversation, reply_id, MessageRole.ASSISTANT)
    with tenant_scope(conversation.tenant_id), transaction.atomic():
        user_message, reply = _last_exchange(conversation)
        if reply is None or row_id(reply_id) != reply.pk:
            _refuse_other(conversation, reply_id, MessageRole.ASSISTANT, "reply")
        assert reply is not None
        if not (_is_author(user_message, user) or admin or _is_tenant_admin(conversation, user)):
            raise RevisionRefused(
                "forbidden",
                "Only the author of the message answered or a tenant admin can regenerate "
                "its reply.",
            )
        _supersede(conversation, reply, RevisionReason.REGENERATED, user)
    return Revised(user_message, reply)


def user_message_edit(
    *, conversation: Conversation, user: Any, message_id: Any, content: Any
) -> Revised:
    """Replace the text of the conversation's last user message (its author's) with
    ``content`` and supersede its reply, so that the edited text is answered. Raises
    :class:`RevisionRefused`, or ``MessageRejected`` for text that would not be accepted as a
    new message (nothing changed either way)."""
    with tenant_scope(conversation.tenant_id):
        _must_exist(conversation, message_id, MessageRole.USER)
    policy = policy_for(conversation)
    with tenant_scope(conversation.tenant_id), transaction.atomic():
        user_message, reply = _last_exchange(conversation)
        if row_id(message_id) != user_message.pk:
            _refuse_other(conversation, message_id, MessageRole.USER, "message")
        if not _is_author(user_message, user):
            raise RevisionRefused("forbidden", "Only the author of a message can edit it.")
        if reply is None:
            raise RevisionRefused("busy", "The reply to this message has not started yet.")
        if not (user_message.attachment and isinstance(content, str) and not content.strip()):
            content = validate_message_content(content, max_chars=max_message_chars(policy))
        counter = storage_counter_for(policy.model_profile)
        new_count = counter.count(content)
        old_tokens = _stored_tokens(user_message, counter.message_overhead)
        now = timezone.now()
        _keep_revision(
            user_message,
            RevisionReason.EDITED,
            user,
            written_at=user_message.edited_at or user_message.created_at,
        )
        Message.objects.filter(pk=user_message.pk).update(
            content=content,
            edited_at=now,
            token_count=new_count,
            token_counter=counter.name,
            updated_at=now,
        )
        MessageEmbedding.objects.filter(message=user_message).delete()
        Conversation.objects.filter(pk=conversation.pk).update(
            history_tokens=Greatest(
                F("history_tokens") + (new_count + counter.message_overhead) - old_tokens, 0
            )
        )
        _supersede(conversation, reply, RevisionReason.RESENT, user)
        user_message.content, user_message.edited_at = content, now
        user_message.token_count, user_message.token_counter = new_count, counter.name
        transaction.on_commit(partial(_standing_instructions_renew, user_message))
    return Revised(user_message, reply)


def _standing_instructions_renew(message: Message) -> None:
    """What the edited text states of how its author wants to be answered replaces what the
    earlier text stated (after the edit's commit; never the edit's failure)."""
    try:
        instructions_recapture(message.tenant_id, message)
    except Exception:
        logger.exception("renewing the instructions of message %s failed", message.pk)


def _last_exchange(conversation: Conversation) -> tuple[Message, Message | None]:
    """The conversation's last user message and its reply (None before it starts), with the
    conversation row locked (the lock every message insert takes): no message is added while
    they change. Raises RevisionRefused when there is no user message or its reply is being
    written."""
    Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
    user_message = (
        Message.objects.select_related("author")
        .filter(conversation_id=conversation.pk, role=MessageRole.USER)
        .order_by("-seq")
        .first()
    )
    if user_message is None:
        raise RevisionRefused("not_found", "No such message in this conversation.")
    reply = Message.objects.filter(answers=user_message, role=MessageRole.ASSISTANT).first()
    if reply is not None and reply.status == Status.STREAMING:
        raise RevisionRefused(
            "busy", "A reply is being written: stop it or wait for it to finish first."
        )
    return user_message, reply


def _is_author(message: Message, user: Any) -> bool:
    return user is not None and message.author_id == getattr(user, "pk", None)


def _is_tenant_admin(conversation: Conversation, user: Any) -> bool:
    """Whether ``user`` administers the conversation's tenant."""
    user_id = getattr(user, "pk", None)
    return user_id is not None and (
        Membership.objects.filter(
            tenant_id=conversation.tenant_id, user_id=user_id, role=MembershipRole.ADMIN
        ).exists()
    )


def _must_exist(conversation: Conversation, message_id: Any, role: str) -> None:
    """Raise "not found" unless ``message_id`` is a ``role`` message of ``conversation``:
    checked before any write transaction starts (another tenant's id costs one read)."""
    pk = row_id(message_id)
    exists = (
        pk is not None
        and Message.objects.filter(conversation_id=conversation.pk, pk=pk, role=role).exists()
    )
    if not exists:
        raise RevisionRefused("not_found", "No such message in this conversation.")


def _refuse_other(conversation: Conversation, message_id: Any, role: str, what: str) -> None:
    """Raise the refusal for a message that is not the one the change may touch: not found
    when it is not this conversation's (or not a ``role`` message), else not the last."""
    _must_exist(conversation, message_id, role)
    raise RevisionRefused("not_last", f"Only the last {what} of the conversation can be changed.")


def _stored_tokens(message: Message, overhead: int) -> int:
    """What ``message`` adds to its conversation's token total (none while uncounted)."""
    return 0 if message.token_count is None else message.token_count + overhead


def _supersede(
    conversation: Conversation, reply: Message, reason: RevisionReason, user: Any
) -> None:
    """Keep ``reply`` as a revision (with its turn's usage) and mark it failed, so the reply
    queue answers its message again; its tokens leave the conversation's total and its vectors
    go (the new reply counts and embeds its own). Its turn's record stays, marked superseded:
    the provider billed that turn, so the usage reports keep counting it."""
    now = timezone.now()
    record = TurnRecord.objects.current().filter(user_message_id=reply.answers_id).first()
    turn: dict[str, Any] = {}
    if record is not None:
        turn = {
            "record_id": record.pk,
            "prompt_tokens_estimated": record.prompt_tokens_estimated,
            "prompt_tokens_reported": record.prompt_tokens_reported,
            "completion_tokens": record.completion_tokens,
            "cost_usd": str(record.cost_usd),
            "created_at": record.created_at.isoformat(),
        }
        TurnRecord.objects.filter(pk=record.pk).update(superseded_at=now)
    _keep_revision(
        reply, reason, user, written_at=reply.updated_at, error_code=reply.error_code, turn=turn
    )
    Message.objects.filter(pk=reply.pk).update(
        status=Status.FAILED,
        content="",
        token_count=None,
        token_counter="",
        error_code="superseded",
        error_message=SUPERSEDED_TEXT,
        updated_at=now,
    )
    MessageEmbedding.objects.filter(message=reply).delete()
    counter = storage_counter_for(policy_for(conversation).model_profile)
    removed = _stored_tokens(reply, counter.message_overhead)
    if removed:
        Conversation.objects.filter(pk=conversation.pk).update(
            history_tokens=Greatest(F("history_tokens") - removed, 0)
        )
    reply.status, reply.content, reply.token_count = Status.FAILED, "", None
    reply.error_code, reply.error_message = "superseded", SUPERSEDED_TEXT


def _keep_revision(message: Message, reason: str, user: Any, **fields: Any) -> None:
    """Keep ``message`` as it is now (text, status, stored count) as one of its revisions."""
    MessageRevision.objects.create(
        tenant_id=message.tenant_id,
        conversation_id=message.conversation_id,
        message=message,
        reason=reason,
        content=message.content,
        status=message.status,
        token_count=message.token_count,
        token_counter=message.token_counter,
        revised_by=user,
        **fields,
    )
