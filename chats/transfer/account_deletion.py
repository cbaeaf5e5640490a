"""A user deleting their own account, in every tenant they belong to.

In each tenant, in this order: the conversations only they take part in go through the one
removal path (``chats.services.retention.conversations_remove``: messages, summaries,
vectors, images after the commit; the turn records stay with their cost figures); in the
conversations they share with others, their messages go (with the replies to them, their
images and revisions), the conversation's counts are taken again and its summaries are
dropped (they may quote them; the summary jobs write new ones), and they leave it; then their
memories, API keys, imports and exports, and membership. An audit event records it in each
tenant (``account_deleted``, with what was removed). Last, the user is deleted: their turn
records keep their cost figures (``TurnRecord.user`` is emptied).

The sockets the user opened close when their membership and keys go
(``chats.socket_access`` sends ``access.changed`` after the commit); the caller logs the
browser session out."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Sum

from chatplatform.audit import audit_record
from chatplatform.models import ApiKey, AuditAction, Membership, Transfer
from chatplatform.models.conversations import Conversation, Message, Participant, TurnRecord
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services.retention import conversations_remove, files_remove_after_commit
from chats.transfer.files import file_remove
from memory.services import user_memories_remove
from summaries.models import Summary


def account_delete(user: Any) -> dict[int, dict[str, int]]:
    """Delete ``user``'s account and what it holds (see the module); returns, per tenant id,
    what was removed."""
    with all_tenants():
        tenant_ids = sorted(
            Membership.objects.filter(user=user).values_list("tenant_id", flat=True)
        )
    removed: dict[int, dict[str, int]] = {}
    label = user.get_username()
    for tenant_id in tenant_ids:
        removed[tenant_id] = _tenant_data_remove(tenant_id, user)
        audit_record(
            AuditAction.ACCOUNT_DELETED,
            actor=user,
            actor_label=label,
            tenant_id=tenant_id,
            changes={name: [count, 0] for name, count in removed[tenant_id].items()},
        )
    with all_tenants(), transaction.atomic():
        get_user_model().objects.filter(pk=user.pk).delete()
    return removed


def _tenant_data_remove(tenant_id: int, user: Any) -> dict[str, int]:
    with tenant_scope(tenant_id):
        mine = set(Participant.objects.filter(user=user).values_list("conversation_id", flat=True))
        shared = set(
            Participant.objects.filter(conversation_id__in=mine)
            .exclude(user=user)
            .values_list("conversation_id", flat=True)
        )
    alone = sorted(mine - shared)
    conversations = conversations_remove(tenant_id, alone)
    with tenant_scope(tenant_id), transaction.atomic():
        messages = _shared_messages_remove(tenant_id, user, sorted(shared))
        Participant.objects.filter(user=user).delete()
        memories = user_memories_remove(tenant_id, user)
        keys, _ = ApiKey.objects.filter(user=user).delete()
        files = list(
            Transfer.objects.filter(user=user).exclude(file="").values_list("file", flat=True)
        )
        Transfer.objects.filter(user=user).delete()
        transaction.on_commit(partial(_transfer_files_remove, files))
        Membership.objects.filter(user=user).delete()
    return {
        "conversations": conversations,
        "messages_in_shared_conversations": messages,
        "memories": memories,
        "api_keys": int(keys),
    }


def _shared_messages_remove(tenant_id: int, user: Any, conversation_ids: list[int]) -> int:
    """Delete the user's messages in these conversations (the caller's transaction and
    scope), with the replies to them; recount the conversations and drop their summaries."""
    if not conversation_ids:
        return 0
    theirs = Message.objects.filter(conversation_id__in=conversation_ids, author=user)
    ids = list(theirs.values_list("pk", flat=True))
    if not ids:
        return 0
    gone = Message.objects.filter(pk__in=ids) | Message.objects.filter(answers_id__in=ids)
    files_remove_after_commit(
        [str(n) for n in gone.exclude(attachment="").values_list("attachment", flat=True) if n]
    )
    TurnRecord.objects.filter(user_message_id__in=ids).update(included=[], excluded=[])
    gone.delete()
    Summary.objects.filter(conversation_id__in=conversation_ids).delete()
    for conversation_id in conversation_ids:
        left = Message.objects.filter(conversation_id=conversation_id)
        Conversation.objects.filter(pk=conversation_id).update(
            message_count=left.count(),
            history_tokens=left.aggregate(total=Sum("token_count"))["total"] or 0,
            window_start_seq=None,
            window_recalled_ids=[],
            window_excerpt_ids=[],
            window_summary_ids=[],
        )
    return len(ids)


def _transfer_files_remove(names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(OSError):
            file_remove(name)
