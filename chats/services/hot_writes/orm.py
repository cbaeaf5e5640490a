"""The hot writes through the ORM: SQLite (the embedded default) and any database without
single-statement writes of its own. A transaction around each write gives what one
statement gives on PostgreSQL; the first write of a transaction (the conversation's
counters) takes the lock that orders concurrent writers. Like the statements, every query
names its tenant itself, so none depends on the active tenant scope."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F

from chatplatform.models.conversations import Conversation, Message, TurnRecord
from chatplatform.spending import SpendEntry, monthly_spend_add
from chatplatform.tenancy.scoping import all_tenants

from .inserts import insert_instance
from .interface import HotWrites, MessageAndReply


class OrmHotWrites(HotWrites):
    def message_insert(
        self,
        fields: dict[str, Any],
        tokens_added: int,
        now: datetime,
        *,
        extra: dict[str, Any] | None = None,
        own_transaction: bool = True,
    ) -> Message:
        # A duplicate fails the insert and rolls the counters' increment back with it.
        atomic = transaction.atomic() if own_transaction else contextlib.nullcontext()
        with all_tenants(), atomic:
            seq = _next_seq(fields["conversation"], tokens_added, now)
            return Message.objects.create(seq=seq, **fields, **(extra or {}))

    def reply_insert_with_record(
        self, fields: dict[str, Any], record: TurnRecord, now: datetime
    ) -> Message:
        with transaction.atomic():
            reply = self.message_insert(fields, 0, now, own_transaction=False)
            record.assistant_message_id = reply.pk
            # Every turn writes one: the ORM's insert building costs more than the insert.
            insert_instance(record)
        return reply

    def reply_finish(
        self,
        *,
        tenant_id: int,
        message_id: int,
        user_message_id: int,
        content: str,
        status: str,
        token_count: int,
        token_counter: str,
        tokens_added: int,
        error_code: str,
        error_message: str,
        turn: dict[str, Any],
        now: datetime,
        spend: SpendEntry | None = None,
    ) -> bool:
        # No savepoint: nothing here recovers from an error, so the caller's transaction (or
        # this one) is all that is needed.
        with all_tenants(), transaction.atomic(savepoint=False):
            reply = Message.objects.filter(tenant_id=tenant_id, pk=message_id)
            finished = reply.update(
                content=content,
                status=status,
                token_count=token_count,
                token_counter=token_counter,
                error_code=error_code,
                error_message=error_message,
                updated_at=now,
            )
            if finished:
                Conversation.objects.filter(
                    tenant_id=tenant_id, pk__in=reply.values("conversation_id")
                ).update(history_tokens=F("history_tokens") + tokens_added)
            recorded = bool(
                TurnRecord.objects.current()
                .filter(tenant_id=tenant_id, user_message_id=user_message_id)
                .update(**turn)
            )
            if recorded and spend is not None:
                monthly_spend_add(tenant_id, spend)
            return recorded

    def message_for_reply(self, tenant_id: int, message_id: int) -> MessageAndReply | None:
        with all_tenants():
            try:
                message = Message.objects.select_related("author", "conversation").get(
                    tenant_id=tenant_id, pk=message_id
                )
            except Message.DoesNotExist:
                return None
            reply = (
                Message.objects.filter(tenant_id=tenant_id, answers=message)
                .only("pk", "status")
                .first()
            )
        return message, (reply.pk if reply else None), (reply.status if reply else "")


def _next_seq(conversation: Conversation, tokens_added: int, now: datetime) -> int:
    """Allocate the conversation's next sequence number, count the new message in its totals
    and mark the conversation active now, in one statement (the row stays locked until the
    transaction ends). Raises Conversation.DoesNotExist if the conversation is gone."""
    table = Conversation._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET last_seq = last_seq + 1, message_count = message_count + 1, "  # noqa: S608
            "history_tokens = history_tokens + %s, updated_at = %s "
            "WHERE tenant_id = %s AND id = %s RETURNING last_seq",
            [
                tokens_added,
                connection.ops.adapt_datetimefield_value(now),
                conversation.tenant_id,
                conversation.pk,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} does not exist")
    return int(row[0])
