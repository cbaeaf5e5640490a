"""Storing messages: validated, idempotent by client id, counted once at save time."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from chatplatform.core.tokens.base import TokenCounter
from chatplatform.counting import storage_counter_for
from chatplatform.models.conversations import Conversation, Message, MessageRole, Status
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.images import ImageInfo
from chats.selectors import message_by_client_id
from chats.services.hot_writes import hot_writes


@dataclass
class MessageRejected(ValueError):
    """A message that cannot be accepted; nothing was stored. ``code`` is machine-readable."""

    code: str
    message: str

    def __str__(self) -> str:
        return self.message


def validate_message_content(content: Any, *, max_chars: int) -> str:
    """Return the content to store, or raise MessageRejected saying what is wrong."""
    if not isinstance(content, str):
        raise MessageRejected("invalid", "The message must be text.")
    if "\x00" in content:
        raise MessageRejected("invalid", "The message contains NUL characters.")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise MessageRejected(
            "invalid", "The message contains invalid characters (unpaired UTF-16 surrogates)."
        ) from None
    if not content.strip():
        raise MessageRejected("empty", "The message is empty.")
    if len(content) > max_chars:
        raise MessageRejected(
            "too_large",
            f"The message has {len(content):,} characters; the limit is {max_chars:,}.",
        )
    return content


def max_message_chars(policy: Any) -> int:
    """The longest message a conversation under ``policy`` accepts: the policy's limit, never
    above the server's ``CHAT_MAX_MESSAGE_CHARS`` (a ceiling no policy can raise)."""
    return min(int(policy.max_message_chars), int(settings.CHAT_MAX_MESSAGE_CHARS))


def message_create(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    author: Any = None,
    client_id: str | None = None,
    reply_to: Message | None = None,
    answers: Message | None = None,
    status: str = Status.COMPLETE,
    validate: bool = True,
    image: tuple[bytes, ImageInfo] | None = None,
    in_caller_transaction: bool = False,
    api_key_id: int | None = None,
    tool_fields: dict[str, Any] | None = None,
) -> tuple[Message, bool]:
    """Store a message; return ``(message, created)``. ``tool_fields``: its tool round
    (``tool_results`` and ``tool_group`` of a tool message) and the tools its client offered
    (``offered_tools``).

    Idempotent: a second call by the same ``author`` with the same ``client_id`` (or, for a
    reply, the same ``answers``) returns the first message and ``created=False``; the
    database's unique constraints decide, so concurrent duplicates also yield one row. The
    sequence number is allocated under a row lock on the conversation. The token count is
    computed here, once, with the counter of the conversation's policy model, and stored with
    the counter's name.

    ``in_caller_transaction``: the caller's open transaction holds the insert, with no
    savepoint of its own; a duplicate then raises IntegrityError (and leaves the caller's
    transaction to roll back) instead of returning the first message.
    """
    policy = policy_for(conversation)
    if validate and role in (MessageRole.USER, MessageRole.TOOL):
        if image is not None and isinstance(content, str) and not content.strip():
            content = ""  # an image alone is a message
        else:
            content = validate_message_content(content, max_chars=max_message_chars(policy))
    counter = storage_counter_for(policy.model_profile)
    token_count = counter.count(content) if status == Status.COMPLETE else None
    tokens_added = (token_count or 0) + (counter.message_overhead if token_count is not None else 0)
    fields = message_fields(
        conversation,
        role,
        content,
        author=author,
        client_id=client_id,
        reply_to=reply_to,
        answers=answers,
        status=status,
        token_count=token_count,
        token_counter=counter.name if token_count is not None else "",
        api_key_id=api_key_id,
    )
    writes = hot_writes()
    attachment = {**(_attachment_fields(image) or {}), **(tool_fields or {})} or None
    with tenant_scope(conversation.tenant_id):
        if in_caller_transaction:
            message = writes.message_insert(
                fields, tokens_added, timezone.now(), extra=attachment, own_transaction=False
            )
            return message, True
        try:
            message = writes.message_insert(fields, tokens_added, timezone.now(), extra=attachment)
        except IntegrityError:
            existing = _existing(conversation, author, client_id, answers)
            if existing is None:
                raise
            return existing, False
    return message, True


def message_fields(
    conversation: Conversation,
    role: str,
    content: str,
    *,
    author: Any = None,
    client_id: str | None = None,
    reply_to: Message | None = None,
    answers: Message | None = None,
    status: str,
    token_count: int | None,
    token_counter: str,
    api_key_id: int | None = None,
) -> dict[str, Any]:
    """The fields of a new message row, as ``Message(**fields)`` takes them (without
    ``seq``, which the insert allocates)."""
    return dict(
        tenant_id=conversation.tenant_id,
        conversation=conversation,
        role=role,
        content=content,
        author=author,
        client_id=client_id,
        reply_to=reply_to,
        answers=answers,
        status=status,
        token_count=token_count,
        token_counter=token_counter,
        api_key_id=api_key_id,
    )


def _attachment_fields(image: tuple[bytes, ImageInfo] | None) -> dict[str, Any]:
    if image is None:
        return {}
    data, info = image
    extension = info.media_type.split("/")[1].replace("jpeg", "jpg")
    return {
        "attachment": ContentFile(data, name=f"{uuid.uuid4().hex}.{extension}"),
        "attachment_type": info.media_type,
        "attachment_bytes": info.size,
    }


def _existing(
    conversation: Conversation, author: Any, client_id: str | None, answers: Message | None
) -> Message | None:
    """The message a duplicate insert ran into: the same author's with this client id (a
    client id is its sender's own), or the reply to ``answers``."""
    if client_id is not None:
        found = message_by_client_id(conversation, author, client_id)
        if found is not None:
            return found
    if answers is not None:
        return Message.objects.filter(answers=answers).first()
    return None


def final_token_count(conversation: Conversation, content: str) -> tuple[int, TokenCounter]:
    """The stored token count of a finished reply, and the counter that made it (the
    storage counter of the conversation's policy model)."""
    counter = storage_counter_for(policy_for(conversation).model_profile)
    return counter.count(content), counter


def message_finish(
    *, message: Message, content: str, status: str, error_code: str = "", error_message: str = ""
) -> Message:
    """Finalise a streamed reply: store its content, status and token count (once)."""
    token_count, counter = final_token_count(message.conversation, content)
    # No savepoint: nothing here recovers from an error, so the caller's transaction (or
    # this one) is all that is needed.
    with tenant_scope(message.tenant_id), transaction.atomic(savepoint=False):
        Message.objects.filter(pk=message.pk).update(
            content=content,
            status=status,
            token_count=token_count,
            token_counter=counter.name,
            error_code=error_code,
            error_message=error_message,
        )
        Conversation.objects.filter(pk=message.conversation_id).update(
            history_tokens=F("history_tokens") + token_count + counter.message_overhead
        )
    message.content, message.status, message.token_count = content, status, token_count
    message.token_counter = counter.name
    return message
