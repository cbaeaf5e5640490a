"""Single-statement writes of message rows on PostgreSQL (the reply pipeline's hot path).

Each turn writes a user message, a reply and the reply's final state. Through the ORM each
write is a BEGIN, an UPDATE of the conversation's counters, an INSERT or UPDATE of the
message and a COMMIT; here the counters and the row change together in one statement, so
autocommit makes it atomic and the statement's own row lock on the conversation orders
concurrent writers. Every statement filters on the tenant, as the scoped managers do.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model

from chatplatform.models.conversations import Conversation, Message, TurnRecord

_MESSAGES = Message._meta.db_table
_CONVERSATIONS = Conversation._meta.db_table

_BUMP_CONVERSATION = (
    f"UPDATE {_CONVERSATIONS} SET last_seq = last_seq + 1, "  # noqa: S608
    "message_count = message_count + 1, history_tokens = history_tokens + %s, updated_at = %s "
    "WHERE tenant_id = %s AND id = %s RETURNING last_seq"
)
_INSERT_MESSAGE_AFTER_BUMP = (
    f"INSERT INTO {_MESSAGES} (tenant_id, conversation_id, seq, author_id, role, content, "  # noqa: S608
    "reply_to_id, answers_id, status, token_count, token_counter, client_id, error_code, "
    "error_message, attachment, attachment_type, attachment_bytes, created_at, updated_at) "
    "SELECT %s, %s, c.last_seq, %s, %s, %s, %s, %s, %s, %s, %s, %s, '', '', NULL, '', NULL, "
    "%s, %s FROM c RETURNING id, seq"
)
_INSERT_MESSAGE = f"WITH c AS ({_BUMP_CONVERSATION}) {_INSERT_MESSAGE_AFTER_BUMP}"


def insert_reply_with_record(fields: dict[str, Any], record: TurnRecord, now: datetime) -> Message:
    """Insert a reply row (``fields`` as for :func:`insert_message_row`; it adds no tokens to
    the conversation's total yet) and the record of its turn (an unsaved TurnRecord whose
    ``assistant_message`` becomes the new row), in one statement.

    Raises IntegrityError when the message already has a reply or a record (nothing
    changed), Conversation.DoesNotExist when the conversation is gone.
    """
    _, record_fields = _insert_statement(TurnRecord)
    values = _db_values(record, [f for f in record_fields if f.attname != "assistant_message_id"])
    with connection.cursor() as cursor:
        cursor.execute(
            _insert_reply_with_record_sql(), [*_insert_message_params(fields, 0, now), *values]
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {fields['conversation'].pk} does not exist")
    record.pk, record.assistant_message_id = row[2], row[0]
    _mark_saved(record)
    return _saved_message(fields, row[0], row[1], now)


@functools.cache
def _insert_reply_with_record_sql() -> str:
    quote = connection.ops.quote_name
    _, record_fields = _insert_statement(TurnRecord)
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


def insert_message_row(fields: dict[str, Any], tokens_added: int, now: datetime) -> Message:
    """Insert a message without attachment (``fields`` as for ``Message(...)``, without
    ``seq``), allocating its sequence number and counting it in the conversation's totals.

    Raises IntegrityError for a duplicate (nothing changed), Conversation.DoesNotExist when
    the conversation is gone. Returns the saved instance.
    """
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_MESSAGE, _insert_message_params(fields, tokens_added, now))
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {fields['conversation'].pk} does not exist")
    return _saved_message(fields, row[0], row[1], now)


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
        now,
        now,
    ]


def _saved_message(fields: dict[str, Any], pk: int, seq: int, now: datetime) -> Message:
    message = Message(id=pk, seq=seq, created_at=now, updated_at=now, **fields)
    _mark_saved(message)
    return message


def _mark_saved(instance: Model) -> None:
    """What ``save()`` leaves on an instance it inserted."""
    instance._state.adding = False
    instance._state.db = connection.alias


def _db_values(instance: Model, fields: Sequence[Any]) -> list[Any]:
    """The values the ORM would write for ``fields`` of a new ``instance``."""
    return [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]


_TURN_RECORDS = TurnRecord._meta.db_table

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
    "WHERE tenant_id = %s AND user_message_id = %s RETURNING id) "
    "SELECT (SELECT count(*) FROM m), (SELECT count(*) FROM c), (SELECT count(*) FROM t)"
)


def finish_reply_row(
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
) -> bool:
    """Store a reply's final text, status and token count, add ``tokens_added`` to its
    conversation's history total and the usage ``turn`` (TurnRecord fields) to the record of
    the turn, in one statement. Returns whether the turn record exists."""
    with connection.cursor() as cursor:
        cursor.execute(
            _FINISH_REPLY,
            [
                content,
                status,
                token_count,
                token_counter,
                error_code,
                error_message,
                now,
                tenant_id,
                message_id,
                tokens_added,
                tenant_id,
                turn["assistant_message_id"],
                turn["time_to_first_token_ms"],
                turn["duration_ms"],
                turn["prompt_tokens_reported"],
                turn["completion_tokens"],
                turn["cache_read_tokens"],
                turn["cache_write_tokens"],
                turn["cost_usd"],
                turn["full_history_cost_usd"],
                tenant_id,
                user_message_id,
            ],
        )
        row = cursor.fetchone()
    return bool(row and row[2])


def _select_list(model: type[Model], alias: str) -> str:
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)


def _instance(model: type[Model], values: Sequence[Any]) -> Any:
    fields = model._meta.concrete_fields
    converted = [
        f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


MessageAndReply = tuple[Message, int | None, str]


@functools.cache
def _message_for_reply_sql() -> str:
    user = get_user_model()
    return (
        f"SELECT {_select_list(Message, 'm')}, {_select_list(Conversation, 'c')}, "  # noqa: S608
        f"{_select_list(user, 'u')}, r.id, r.status FROM {_MESSAGES} m "
        f"JOIN {_CONVERSATIONS} c ON c.tenant_id = m.tenant_id AND c.id = m.conversation_id "
        f"LEFT JOIN {user._meta.db_table} u ON u.id = m.author_id "
        f"LEFT JOIN {_MESSAGES} r ON r.tenant_id = m.tenant_id AND r.answers_id = m.id "
        "WHERE m.tenant_id = %s AND m.id = %s"
    )


def message_for_reply(tenant_id: int, message_id: int) -> MessageAndReply | None:
    """The user message ``message_id`` of the tenant with its conversation and author loaded,
    and its reply's id and status (None and "" without one), in one query without the ORM's
    query building (it runs on every turn). None when there is no such message."""
    with connection.cursor() as cursor:
        cursor.execute(_message_for_reply_sql(), [tenant_id, message_id])
        row = cursor.fetchone()
    if row is None:
        return None
    sizes = [len(m._meta.concrete_fields) for m in (Message, Conversation, get_user_model())]
    message = _instance(Message, row[: sizes[0]])
    conversation = _instance(Conversation, row[sizes[0] : sizes[0] + sizes[1]])
    author_values = row[sizes[0] + sizes[1] : sizes[0] + sizes[1] + sizes[2]]
    Message.conversation.field.set_cached_value(message, conversation)  # type: ignore[attr-defined]
    author = _instance(get_user_model(), author_values) if author_values[0] is not None else None
    Message.author.field.set_cached_value(message, author)  # type: ignore[attr-defined]
    reply_id, reply_status = row[-2], row[-1]
    return message, reply_id, reply_status or ""


@functools.cache
def _insert_statement(model: type[Model]) -> tuple[str, tuple[Any, ...]]:
    quote = connection.ops.quote_name
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    columns = ", ".join(quote(f.column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    table = quote(model._meta.db_table)
    pk = quote(model._meta.pk.column)  # type: ignore[union-attr]
    return f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) RETURNING {pk}", fields  # noqa: S608


def insert_instance(instance: Model) -> None:
    """Insert an unsaved ``instance`` (auto primary key) with the values the ORM would write
    (each field's ``pre_save`` and ``get_db_prep_save``), skipping the ORM's query building;
    sets its primary key. Raises IntegrityError as ``save()`` would. No signals are sent."""
    sql, fields = _insert_statement(type(instance))
    with connection.cursor() as cursor:
        cursor.execute(sql, _db_values(instance, fields))
        instance.pk = cursor.fetchone()[0]
    _mark_saved(instance)
