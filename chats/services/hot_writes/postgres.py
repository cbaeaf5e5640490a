"""The hot writes on PostgreSQL: each one a single statement.

Through the ORM each write of a turn is a BEGIN, an UPDATE of the conversation's counters,
an INSERT or UPDATE of the message and a COMMIT, plus the ORM's query building, which cost
more CPU than the statements (``docs/scaling.md``). Here the counters and the row change
together in one statement, so autocommit makes it atomic and the statement's own row lock on
the conversation orders concurrent writers. Every statement filters on the tenant, as the
scoped managers do.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from chatplatform.db import row_instances, select_columns
from chatplatform.django_internals import instance_mark_saved
from chatplatform.models.conversations import Conversation, Message, TurnRecord
from chatplatform.spending import SpendEntry, spend_upsert_sql

from .inserts import db_values, insert_statement
from .interface import HotWrites, MessageAndReply
from .orm import OrmHotWrites

_MESSAGES = Message._meta.db_table
_CONVERSATIONS = Conversation._meta.db_table
_TURN_RECORDS = TurnRecord._meta.db_table

_BUMP_CONVERSATION = (
    f"UPDATE {_CONVERSATIONS} SET last_seq = last_seq + 1, "  # noqa: S608
    "message_count = message_count + 1, history_tokens = history_tokens + %s, updated_at = %s "
    "WHERE tenant_id = %s AND id = %s RETURNING last_seq"
)
_INSERT_MESSAGE_AFTER_BUMP = (
    f"INSERT INTO {_MESSAGES} (tenant_id, conversation_id, seq, author_id, role, content, "  # noqa: S608
    "reply_to_id, answers_id, status, token_count, token_counter, client_id, api_key_id, "
    "error_code, error_message, attachment, attachment_type, attachment_bytes, created_at, "
    "updated_at) SELECT %s, %s, c.last_seq, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '', '', "
    "NULL, '', NULL, %s, %s FROM c RETURNING id, seq"
)
_INSERT_MESSAGE = f"WITH c AS ({_BUMP_CONVERSATION}) {_INSERT_MESSAGE_AFTER_BUMP}"

_FINISH_REPLY = (
    f"WITH m AS (UPDATE {_MESSAGES} SET content = %s, status = %s, token_count = %s, "  # noqa: S608
    "token_counter = %s, error_code = %s, error_message = %s, updated_at = %s "
    "WHERE tenant_id = %s AND id = %s RETURNING conversation_id), "
    f"c AS (UPDATE {_CONVERSATIONS} SET history_tokens = history_tokens + %s "
    "WHERE tenant_id = %s AND id IN (SELECT conversation_id FROM m) RETURNING id), "
    f"t AS (UPDATE {_TURN_RECORDS} SET assistant_message_id = %s, time_to_first_token_ms = %s, "
    "duration_ms = %s, prompt_tokens_reported = %s, completion_tokens = %s, "
    "cache_read_tokens = %s, cache_write_tokens = %s, cost_usd = %s, "
    "full_history_cost_usd = %s "
    "WHERE tenant_id = %s AND user_message_id = %s AND superseded_at IS NULL RETURNING id) "
)
_FINISH_COUNTS = (
    "SELECT (SELECT count(*) FROM m), (SELECT count(*) FROM c), (SELECT count(*) FROM t)"
)
#: The turn's bill added to its month's totals (the tenant's, the author's, the key's) when
#: its record was updated; a total's first turn creates its row.
_SPEND_ROWS = (
    "SELECT %s, %s, x.u, x.k, %s, %s, 1 FROM (VALUES (0::bigint, 0::bigint, true), "
    "(%s, 0, %s), (0, %s, %s)) AS x(u, k, kept) WHERE x.kept AND EXISTS (SELECT 1 FROM t)"
)
_ADD_SPEND = f", s AS ({spend_upsert_sql(_SPEND_ROWS)} RETURNING 1) "

#: The usage columns of the turn record that the finish writes, in the statement's order.
USAGE_FIELDS = (
    "assistant_message_id",
    "time_to_first_token_ms",
    "duration_ms",
    "prompt_tokens_reported",
    "completion_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "full_history_cost_usd",
)


class PostgresHotWrites(HotWrites):
    """Single statements; a message with extra fields (an attachment, a tool round) goes
    through the ORM (an attachment's file is stored by the field)."""

    _with_extra = OrmHotWrites()

    def message_insert(
        self,
        fields: dict[str, Any],
        tokens_added: int,
        now: datetime,
        *,
        extra: dict[str, Any] | None = None,
        own_transaction: bool = True,
    ) -> Message:
        if extra:
            return self._with_extra.message_insert(
                fields, tokens_added, now, extra=extra, own_transaction=own_transaction
            )
        if own_transaction and connection.in_atomic_block:
            # A savepoint, so that a duplicate leaves the caller's transaction usable.
            with transaction.atomic():
                return self._insert_message(fields, tokens_added, now)
        # Alone, the statement is its own transaction: no BEGIN and COMMIT round trips.
        return self._insert_message(fields, tokens_added, now)

    def _insert_message(self, fields: dict[str, Any], tokens_added: int, now: datetime) -> Message:
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_MESSAGE, _insert_message_params(fields, tokens_added, now))
            row = cursor.fetchone()
        if row is None:
            raise Conversation.DoesNotExist(
                f"conversation {fields['conversation'].pk} does not exist"
            )
        return _saved_message(fields, row[0], row[1], now)

    def reply_insert_with_record(
        self, fields: dict[str, Any], record: TurnRecord, now: datetime
    ) -> Message:
        _, record_fields = insert_statement(TurnRecord)
        values = db_values(
            record, [f for f in record_fields if f.attname != "assistant_message_id"]
        )
        with connection.cursor() as cursor:
            cursor.execute(
                _insert_reply_with_record_sql(), [*_insert_message_params(fields, 0, now), *values]
            )
            row = cursor.fetchone()
        if row is None:
            raise Conversation.DoesNotExist(
                f"conversation {fields['conversation'].pk} does not exist"
            )
        record.pk, record.assistant_message_id = row[2], row[0]
        instance_mark_saved(record, connection.alias)
        return _saved_message(fields, row[0], row[1], now)

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
        params = [
            *(content, status, token_count, token_counter, error_code, error_message),
            *(now, tenant_id, message_id, tokens_added, tenant_id),
            *(turn[name] for name in USAGE_FIELDS),
            *(tenant_id, user_message_id),
        ]
        statement = f"{_FINISH_REPLY} {_FINISH_COUNTS}"
        if spend is not None:
            statement = f"{_FINISH_REPLY}{_ADD_SPEND}{_FINISH_COUNTS}"
            params += [
                *(tenant_id, spend.month, spend.cost_usd, spend.tokens),
                *(spend.user_pk, bool(spend.user_pk), spend.api_key_pk, bool(spend.api_key_pk)),
            ]
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            row = cursor.fetchone()
        return bool(row and row[2])

    def message_for_reply(self, tenant_id: int, message_id: int) -> MessageAndReply | None:
        """In one query without the ORM's query building (it runs on every turn)."""
        with connection.cursor() as cursor:
            cursor.execute(_message_for_reply_sql(), [tenant_id, message_id])
            row = cursor.fetchone()
        if row is None:
            return None
        message, conversation, author = row_instances(row, Message, Conversation, get_user_model())
        Message.conversation.field.set_cached_value(message, conversation)  # type: ignore[attr-defined]
        Message.author.field.set_cached_value(message, author)  # type: ignore[attr-defined]
        reply_id, reply_status = row[-2], row[-1]
        return message, reply_id, reply_status or ""


@functools.cache
def _insert_reply_with_record_sql() -> str:
    quote = connection.ops.quote_name
    _, record_fields = insert_statement(TurnRecord)
    columns = ", ".join(quote(f.column) for f in record_fields)
    select = ", ".join(
        "m.id" if f.attname == "assistant_message_id" else "%s" for f in record_fields
    )
    return (
        f"WITH c AS ({_BUMP_CONVERSATION}), m AS ({_INSERT_MESSAGE_AFTER_BUMP}), "  # noqa: S608
        f"t AS (INSERT INTO {quote(TurnRecord._meta.db_table)} ({columns}) "
        "SELECT " + select + " FROM m RETURNING id) "
        "SELECT m.id, m.seq, t.id FROM m, t"
    )


def _insert_message_params(fields: dict[str, Any], tokens_added: int, now: datetime) -> list[Any]:
    conversation = fields["conversation"]
    tenant_id = fields["tenant_id"]
    author, reply_to, answers = fields["author"], fields["reply_to"], fields["answers"]
    return [
        tokens_added,
        now,
        tenant_id,
        conversation.pk,
        tenant_id,
        conversation.pk,
        author.pk if author is not None else None,
        fields["role"],
        fields["content"],
        reply_to.pk if reply_to is not None else None,
        answers.pk if answers is not None else None,
        fields["status"],
        fields["token_count"],
        fields["token_counter"],
        fields["client_id"],
        fields.get("api_key_id"),
        now,
        now,
    ]


def _saved_message(fields: dict[str, Any], pk: int, seq: int, now: datetime) -> Message:
    message = Message(id=pk, seq=seq, created_at=now, updated_at=now, **fields)
    instance_mark_saved(message, connection.alias)
    return message


@functools.cache
def _message_for_reply_sql() -> str:
    user = get_user_model()
    return (
        f"SELECT {select_columns(Message, 'm')}, {select_columns(Conversation, 'c')}, "  # noqa: S608
        f"{select_columns(user, 'u')}, r.id, r.status FROM {_MESSAGES} m "
        f"JOIN {_CONVERSATIONS} c ON c.tenant_id = m.tenant_id AND c.id = m.conversation_id "
        f"LEFT JOIN {user._meta.db_table} u ON u.id = m.author_id "
        f"LEFT JOIN {_MESSAGES} r ON r.tenant_id = m.tenant_id AND r.answers_id = m.id "
        "WHERE m.tenant_id = %s AND m.id = %s"
    )
