"""Counting a batch of messages and writing the counts, safe against concurrent writers.

:func:`plan_updates` counts the rows that need it (one ``count_many`` per counter) and
computes how each changes its conversation's ``history_tokens``, in the convention
``message_create`` uses (count + the counter's per-message overhead).

:func:`apply_updates` writes them inside the caller's transaction: a row is only updated if
it still holds the count and counter that were read (otherwise it changed meanwhile and is
left alone), and ``history_tokens`` moves by the difference of exactly the rows updated
(``RETURNING``), the conversations' rows locked in id order first so concurrent writers
cannot deadlock. On PostgreSQL the updates are single ``UPDATE ... FROM unnest(arrays)``
statements (a few array parameters whatever the batch size); on SQLite
``WITH v(...) AS (VALUES ...) UPDATE ... FROM v``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.db import connection

from chatplatform.core.tokens import CounterNotAvailable, TokenCounter, get_counter
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.token_counts.targets import Targets

SQLITE_ROWS_PER_STATEMENT = 2000  # 5 parameters a row, well under SQLite's 32,766
DEFAULT_OVERHEAD = 4


def _overhead(counter_name: str) -> int:
    try:
        return get_counter(counter_name).message_overhead
    except (CounterNotAvailable, ImportError, ValueError):
        return DEFAULT_OVERHEAD


Row = tuple[int, int, str, int | None, str]  # id, conversation, content, count, counter
ROW_FIELDS = ("pk", "conversation_id", "content", "token_count", "token_counter")
Update = tuple[int, int, int, str, int | None, str, int]  # + new count, new counter, delta


def plan_updates(rows: Sequence[Row], targets: Targets) -> list[Update]:
    """Count the rows that need it, grouped by counter (one ``count_many`` per counter)."""
    by_counter: dict[str, list[Row]] = defaultdict(list)
    counters: dict[str, TokenCounter] = {}
    for row in rows:
        counter = targets.for_conversation(row[1])
        if row[3] is not None and row[4] == counter.name:
            continue
        by_counter[counter.name].append(row)
        counters[counter.name] = counter
    updates: list[Update] = []
    overheads: dict[str, int] = {}
    for name, group in by_counter.items():
        counter = counters[name]
        counts = counter.count_many([row[2] for row in group])
        for (message_id, conversation_id, _, old, old_counter), new in zip(
            group, counts, strict=True
        ):
            if old is None:
                delta = new + counter.message_overhead
            else:
                if old_counter not in overheads:
                    overheads[old_counter] = _overhead(old_counter)
                delta = (new + counter.message_overhead) - (old + overheads[old_counter])
            updates.append((message_id, conversation_id, new, name, old, old_counter, delta))
    return updates


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def apply_updates(tenant_id: int, updates: list[Update]) -> int:
    """Write ``updates`` (inside the caller's transaction); return how many rows changed.

    Only rows that still hold the count and counter that were read are updated, and the
    conversations' ``history_tokens`` move by the deltas of exactly those rows.
    """
    if not updates:
        return 0
    vendor = connection.vendor
    if vendor == "postgresql":
        updated_ids = _apply_postgresql(tenant_id, updates)
    elif vendor == "sqlite":
        updated_ids = _apply_sqlite(tenant_id, updates)
    else:  # pragma: no cover - other backends: plain bulk_update, no concurrency check
        updated_ids = _apply_generic(tenant_id, updates)
    done = set(updated_ids)
    deltas: dict[int, int] = defaultdict(int)
    for message_id, conversation_id, *_rest, delta in updates:
        if message_id in done:
            deltas[conversation_id] += delta
    deltas = {c: d for c, d in deltas.items() if d}
    if deltas:
        _add_history_tokens(tenant_id, deltas)
    return len(done)


def _apply_postgresql(tenant_id: int, updates: list[Update]) -> list[int]:
    message = _quote(Message._meta.db_table)
    sql = f"""
        UPDATE {message} AS m
        SET token_count = v.new_count, token_counter = v.new_counter
        FROM unnest(%s::bigint[], %s::integer[], %s::varchar[], %s::integer[], %s::varchar[])
             AS v(id, new_count, new_counter, old_count, old_counter)
        WHERE m.id = v.id AND m.tenant_id = %s
          AND m.token_counter = v.old_counter
          AND m.token_count IS NOT DISTINCT FROM v.old_count
        RETURNING m.id
    """  # noqa: S608 - identifiers are quoted model table names, values are parameters
    params: list[Any] = [
        [u[0] for u in updates],
        [u[2] for u in updates],
        [u[3] for u in updates],
        [u[4] for u in updates],
        [u[5] for u in updates],
        tenant_id,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _apply_sqlite(tenant_id: int, updates: list[Update]) -> list[int]:
    message = _quote(Message._meta.db_table)
    done: list[int] = []
    with connection.cursor() as cursor:
        for start in range(0, len(updates), SQLITE_ROWS_PER_STATEMENT):
            chunk = updates[start : start + SQLITE_ROWS_PER_STATEMENT]
            values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk))
            sql = f"""
                WITH v(id, new_count, new_counter, old_count, old_counter) AS (VALUES {values})
                UPDATE {message}
                SET token_count = v.new_count, token_counter = v.new_counter
                FROM v
                WHERE {message}.id = v.id AND {message}.tenant_id = %s
                  AND {message}.token_counter = v.old_counter
                  AND {message}.token_count IS v.old_count
                RETURNING {message}.id
            """  # noqa: S608 - identifiers are quoted model table names, values are parameters
            params: list[Any] = []
            for message_id, _conv, new, name, old, old_counter, _delta in chunk:
                params.extend((message_id, new, name, old, old_counter))
            params.append(tenant_id)
            cursor.execute(sql, params)
            done.extend(row[0] for row in cursor.fetchall())
    return done


def _apply_generic(tenant_id: int, updates: list[Update]) -> list[int]:  # pragma: no cover
    objects = [
        Message(pk=u[0], tenant_id=tenant_id, token_count=u[2], token_counter=u[3]) for u in updates
    ]
    with tenant_scope(tenant_id):
        Message.objects.bulk_update(objects, ["token_count", "token_counter"], batch_size=1000)
    return [u[0] for u in updates]


def _add_history_tokens(tenant_id: int, deltas: dict[int, int]) -> None:
    table = _quote(Conversation._meta.db_table)
    ids = sorted(deltas)
    amounts = [deltas[c] for c in ids]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Lock in id order: concurrent writers (and message_create) never deadlock.
            cursor.execute(
                f"SELECT id FROM {table} WHERE id = ANY(%s) AND tenant_id = %s "  # noqa: S608
                "ORDER BY id FOR UPDATE",
                [ids, tenant_id],
            )
            cursor.execute(
                f"""
                UPDATE {table} AS c SET history_tokens = GREATEST(c.history_tokens + v.delta, 0)
                FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, delta)
                WHERE c.id = v.id AND c.tenant_id = %s
                """,  # noqa: S608 - quoted table name; values are parameters
                [ids, amounts, tenant_id],
            )
            return
        for start in range(0, len(ids), SQLITE_ROWS_PER_STATEMENT):
            chunk_ids = ids[start : start + SQLITE_ROWS_PER_STATEMENT]
            values = ", ".join(["(%s, %s)"] * len(chunk_ids))
            params: list[Any] = []
            for conversation_id in chunk_ids:
                params.extend((conversation_id, deltas[conversation_id]))
            params.append(tenant_id)
            cursor.execute(
                f"""
                WITH v(id, delta) AS (VALUES {values})
                UPDATE {table} SET history_tokens = max({table}.history_tokens + v.delta, 0)
                FROM v WHERE {table}.id = v.id AND {table}.tenant_id = %s
                """,  # noqa: S608 - quoted table name; values are parameters
                params,
            )
