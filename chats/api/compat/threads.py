"""Which conversation an SDK request continues, and what of its messages is new.

- **Named** (the ``X-Conversation-Id`` header, or ``metadata.conversation_id``): a conversation
  the key's user takes part in, in the key's tenant (else 404, alike for missing and another
  tenant's). The client may send only its new message: the last user turn is new, anything
  before it is the platform's already and is not stored again.
- **Not named**: the client sends its whole history. The conversation it continues is the one
  of the key's user whose recorded hash chain (:class:`ConversationFingerprint`) the history
  starts with and whose messages stored since match the client's (one indexed read, then the
  few messages after the record); only the turns after them are stored. A history no
  conversation matches starts a new conversation with everything before its last turn.

Either way the last user turn is sent through the platform's one send service, and the prompt
is assembled from the stored conversation under the tenant's policy, whatever the client
sent. A request sent again (same history) is not stored twice: the new message's client id
is the chain value of the whole history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework import status
from rest_framework.exceptions import NotFound

from chatplatform.core.llm.tool_rounds import answers_exactly
from chatplatform.models.conversations import Conversation, Status
from chats.api.compat.transcript import (
    ASSISTANT,
    TOOL,
    USER,
    Turn,
    hash_chain,
    known_turns,
    merged,
    tool_parts,
    tool_turn,
)
from chats.api.errors import ApiError
from chats.api.principal import ApiPrincipal
from chats.api.serializers.messages import MAX_CLIENT_ID
from chats.api.views.messages import rejected
from chats.selectors import (
    conversation_for_member,
    fingerprint_candidates,
    message_by_client_id,
    messages_after,
    tool_call_message,
)
from chats.services import conversation_create
from chats.services.messages import MessageRejected
from chats.services.transcripts import client_system_set, fingerprint_save, transcript_import

#: What an earlier turn without text (an image, say: only the new message's image is kept) is
#: stored as.
WITHOUT_TEXT = "[content without text, not kept]"
#: A stored reply in these states is part of the history the client received.
RECEIVED = frozenset({Status.COMPLETE, Status.INCOMPLETE})
CLIENT_ID_PREFIX = "compat-"
#: A history sent again unchanged within this time is the same request (an SDK's retry): it
#: gets the stored message's reply. Later, it starts a conversation of its own.
RESEND_WINDOW = timedelta(minutes=10)


@dataclass(frozen=True)
class Thread:
    """The conversation a request continues and the message to send in it."""

    conversation: Conversation
    content: str
    client_id: str | None
    #: The client's chain ``(first hash, whole-history hash, turns)`` to record once the
    #: message is stored (unnamed requests only).
    chain: tuple[str, str, int] | None = None
    #: The new message's image as the send service takes it (``{"media_type", "data"}``).
    image: dict[str, str] | None = None
    #: The new message's tool round (results of the last reply's calls) and the tools the
    #: client offers its reply, as the send service takes them.
    tool_fields: dict[str, Any] | None = None


def invalid(message: str, param: str = "messages") -> ApiError:
    return ApiError(status.HTTP_400_BAD_REQUEST, "invalid_request", message, {param: [message]})


def thread_for(
    principal: ApiPrincipal,
    turns: list[Turn],
    *,
    system: str,
    conversation_id: Any = None,
    idempotency_key: str | None = None,
    image: dict[str, str] | None = None,
    all_new: bool = False,
    offered: dict[str, Any] | None = None,
) -> Thread:
    """The conversation ``turns`` (the client's messages, system ones apart) continue, with
    what of them is new stored; raises NotFound for a named conversation the caller may not
    use, ApiError 400 for turns that cannot be a chat, MessageRejected for a turn the
    conversation refuses (nothing stored). ``all_new``: the named conversation's client sends
    only new turns (a request continuing a previous response), so the turns before the last
    are stored too, before it."""
    turns = merged(turns)
    if not turns or turns[-1][0] not in (USER, TOOL):
        raise invalid("The last message must be the user's (or the results of tool calls).")
    if conversation_id is not None:
        conversation = conversation_for_member(
            principal.user, conversation_id, tenant_id=principal.tenant_id
        )
        if conversation is None:
            raise NotFound("No such conversation.")
        if idempotency_key is not None and not 0 < len(idempotency_key) <= MAX_CLIENT_ID:
            raise invalid(f"Idempotency-Key must be 1 to {MAX_CLIENT_ID} characters.", "header")
        with transaction.atomic():
            sent_before = idempotency_key is not None and message_by_client_id(
                conversation, principal.user, idempotency_key
            )
            if all_new and not sent_before:
                _import(conversation, principal.user, turns[:-1])
            client_system_set(conversation, system)
            before = turns[-2] if all_new and len(turns) > 1 else None
            fields = _tool_fields(conversation, turns[-1], offered, before)
        return Thread(conversation, turns[-1][1], idempotency_key, image=image, tool_fields=fields)
    chain = hash_chain(turns)
    conversation, known = _continued(principal, turns, chain)
    with transaction.atomic():  # a turn refused leaves no new conversation behind
        if conversation is None:
            conversation = conversation_create(tenant=principal.tenant, created_by=principal.user)
            known = 0
        _import(conversation, principal.user, turns[known:-1], turns[known - 1] if known else None)
        client_system_set(conversation, system)
        fields = _tool_fields(
            conversation, turns[-1], offered, turns[-2] if len(turns) > 1 else None
        )
    return Thread(
        conversation,
        turns[-1][1],
        CLIENT_ID_PREFIX + chain[-1][:48],
        chain=(chain[0], chain[-1], len(turns)),
        image=image,
        tool_fields=fields,
    )


def _import(
    conversation: Conversation, user: Any, turns: list[Turn], before: Turn | None = None
) -> None:
    """Store the client's earlier ``turns`` (a turn without text as :data:`WITHOUT_TEXT`, a
    tool round's with its calls or results, a reply that only calls tools with no text);
    ``before``: the client's turn before them, when it sent it (else the conversation's
    stored reply is the one before). A turn the conversation refuses, or results that do
    not answer exactly the calls of the turn before them, are the client's error (400 or
    413), nothing stored."""
    rounds: list[dict[str, Any] | None] = []
    previous = before
    for turn in turns:
        parts = tool_parts(turn)
        if turn[0] == ASSISTANT and parts:
            rounds.append({"tool_calls": parts, "tool_group": str(parts[0]["id"])})
        elif turn[0] == TOOL:
            rounds.append(
                {"tool_results": parts, "tool_group": _answered(conversation, previous, parts)}
            )
        else:
            rounds.append(None)
        previous = turn
    try:
        transcript_import(
            conversation,
            user,
            # A reply's calls are its content: without text it is stored as the platform
            # stores a reply that only calls tools.
            [
                (turn[0], turn[1] or ("" if extra else WITHOUT_TEXT))
                for turn, extra in zip(turns, rounds, strict=True)
            ],
            tools=rounds,
        )
    except MessageRejected as exc:
        raise rejected(exc) from None


UNPAIRED = "Tool results must answer every call of the reply before them, once, and only those."


def _answered(
    conversation: Conversation, before: Turn | None, results: list[dict[str, Any]]
) -> str:
    """The round (its first call's id) whose calls ``results`` answer: those of the client's
    turn ``before`` them, which must be a reply calling exactly those tools; with no such
    turn sent (a named conversation's client sends only what is new), the conversation's
    stored reply (:func:`_group_of`). 400 otherwise."""
    if before is None:
        return _group_of(conversation, results)
    calls = tool_parts(before) if before[0] == ASSISTANT else []
    if not answers_exactly((str(c["id"]) for c in calls), (str(r["tool_use_id"]) for r in results)):
        raise invalid(UNPAIRED)
    return str(calls[0]["id"])


def _group_of(conversation: Conversation, results: list[dict[str, Any]]) -> str:
    """The round of the stored reply whose calls ``results`` answer (each once, and only
    them); 400 when no reply of the conversation made exactly those calls."""
    ids = [str(r["tool_use_id"]) for r in results]
    call = tool_call_message(conversation, set(ids))
    if call is None or not answers_exactly((str(c["id"]) for c in call.tool_calls or ()), ids):
        raise invalid(UNPAIRED)
    return str(call.tool_group)


def _tool_fields(
    conversation: Conversation, last: Turn, offered: dict[str, Any] | None, before: Turn | None
) -> dict[str, Any] | None:
    """What the new message stores of tools: its results (a tool turn) with their round
    (:func:`_answered`, ``before`` the client's turn before it, if it sent it), and the tools
    the client offers its reply."""
    fields: dict[str, Any] = {"offered_tools": offered} if offered else {}
    if last[0] == TOOL:
        results = tool_parts(last)
        fields.update(tool_results=results, tool_group=_answered(conversation, before, results))
    return fields or None


def _continued(
    principal: ApiPrincipal, turns: list[Turn], chain: list[str]
) -> tuple[Conversation | None, int]:
    """The conversation the client's history continues and how many of its turns it holds;
    ``(None, 0)`` when none does."""
    for record in fingerprint_candidates(principal.tenant_id, principal.user, chain[0]):
        if record.message_count > len(turns) or chain[record.message_count - 1] != (
            record.fingerprint
        ):
            continue
        conversation = record.conversation
        after = messages_after(
            conversation, record.through_seq, len(turns) - record.message_count + 1
        )
        if any(m.status == Status.STREAMING for m in after):
            continue  # a reply the client cannot have yet
        stored = merged(stored_turn(m) for m in after if m.status in RECEIVED)
        if any(turn[0] not in (USER, ASSISTANT, TOOL) for turn in stored):
            continue
        known = known_turns(
            turns,
            chain,
            count=record.message_count,
            fingerprint=record.fingerprint,
            stored_after=stored,
            resend=timezone.now() - record.updated_at < RESEND_WINDOW,
        )
        if known is None:
            continue
        if conversation_for_member(principal.user, conversation.pk, tenant_id=principal.tenant_id):
            return conversation, known
    return None, 0


def thread_record(thread: Thread, user: Any, stored_seq: int) -> None:
    """Record where the client's history now stands (after its new message was stored as
    ``stored_seq``), so that its next request, resent whole, continues this conversation."""
    if thread.chain is None:
        return
    first, whole, count = thread.chain
    fingerprint_save(
        thread.conversation,
        user,
        first_hash=first,
        fingerprint=whole,
        message_count=count,
        through_seq=stored_seq,
    )


def stored_turn(message: Any) -> Turn:
    """A stored message as the turn a client sends of it."""
    if message.tool_calls:
        return tool_turn(ASSISTANT, message.content, message.tool_calls)
    if message.tool_results:
        return tool_turn(TOOL, message.content, message.tool_results)
    return (message.role, message.content)
