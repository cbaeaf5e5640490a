"""Database helpers of the raw-SQL reads and writes on the hot paths: statements prepared
once per connection, and datetime columns read back as the ORM would give them; giving a
thread's connections back at the end of its unit of work; and telling a database that cannot
be reached from a statement that failed."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar, cast

import psycopg
import psycopg_pool
from django.conf import settings
from django.db import OperationalError as DjangoOperationalError
from django.db import connection, connections
from django.db.models import Model
from django.utils import timezone
from django.utils.dateparse import parse_datetime


def execute_prepared(cursor: Any, sql: str, params: dict[str, Any]) -> None:
    """``cursor.execute(sql, params)``, as a statement prepared once per connection when the
    database binds parameters server-side (PostgreSQL with psycopg 3 and
    ``OPTIONS["server_side_binding"]``, the project's default).

    Why: the turn's history statement is long and has several subqueries; PostgreSQL spends
    about as long parsing and planning it as running it, on every turn. Prepared, it is
    parsed once per connection (connections persist: the pool's, ``DATABASE_POOL``, or a
    thread's with ``CONN_MAX_AGE``) and planned once it has a generic plan. Django leaves
    psycopg's automatic preparation off (``prepare_threshold`` None) unless the settings ask
    for it, so this one statement asks for it itself, for the one call
    (``prepare_threshold`` 0 prepares at once and reuses the statement already prepared;
    other statements are left as the connection has them).
    Server-side binding is also the project's switch for PgBouncer: in transaction mode
    named statements need PgBouncer 1.21+ with ``max_prepared_statements``, and binding on
    the client (where nothing is prepared) is what older PgBouncers get."""
    raw = connection.connection if connection.vendor == "postgresql" else None
    if raw is None or not server_side_binding():
        cursor.execute(sql, params)
        return
    with _prepare_threshold(raw, 0):
        cursor.execute(sql, params)


def execute_planned(cursor: Any, sql: str, params: list[Any] | dict[str, Any]) -> None:
    """``cursor.execute(sql, params)``, never as a prepared statement: PostgreSQL plans it
    with these very values each time.

    Why: a prepared statement runs on plans made for its values five times, then on one
    generic plan when that looks no costlier, and for a statement whose best plan depends on
    its values a generic plan can be ten times slower. The full-text search is one: how many
    messages a term matches decides how its matches are read, and at 100,000 messages its
    generic plan took 73-83 ms where a plan for the values takes 8 (planning costs under a
    millisecond). Every other statement is left as the connection has it
    (``DB_PREPARE_THRESHOLD``). ``cursor``: a cursor of any database alias."""
    with _prepare_threshold(getattr(cursor, "connection", None), None):
        cursor.execute(sql, params)


@contextmanager
def _prepare_threshold(raw: Any, threshold: int | None) -> Iterator[None]:
    """psycopg's ``prepare_threshold`` of the connection ``raw`` set to ``threshold`` for the
    statements run meanwhile, then as it was (nothing for a connection without one: SQLite's,
    or none)."""
    if raw is None or not hasattr(raw, "prepare_threshold"):
        yield
        return
    saved = raw.prepare_threshold
    raw.prepare_threshold = threshold
    try:
        yield
    finally:
        raw.prepare_threshold = saved


def in_array(values: list[int]) -> tuple[str, Any]:
    """``(test, parameter)``: the SQL that tests a column against the list of integers
    ``values`` (written after the column) and its one parameter, in the connection's
    dialect: ``= ANY(%s)`` with the list on PostgreSQL (one statement whatever the number of
    values, so it is prepared once per connection), ``IN (SELECT value FROM json_each(%s))``
    with a JSON array on SQLite."""
    wanted = [int(v) for v in values]
    if connection.vendor == "postgresql":
        return "= ANY(%s)", wanted
    return "IN (SELECT value FROM json_each(%s))", json.dumps(wanted)


def select_columns(model: type[Model], alias: str) -> str:
    """Every concrete column of ``model`` under the table alias ``alias``, in the order
    :func:`row_instances` reads them back."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)


def row_instances(row: Sequence[Any], *models: type[Model]) -> list[Any]:
    """The instances of ``models`` whose columns (:func:`select_columns`, in that order) start
    ``row``, as the ORM would build them (each field's own conversion of its database value);
    ``None`` for a model whose primary key is null (a ``LEFT JOIN`` that matched nothing). On
    PostgreSQL, whose driver returns every column as its Python type."""
    instances: list[Any] = []
    start = 0
    for model in models:
        fields = model._meta.concrete_fields
        values = row[start : start + len(fields)]
        start += len(fields)
        if values[[f.primary_key for f in fields].index(True)] is None:
            instances.append(None)
            continue
        converted = [
            f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
            for f, v in zip(fields, values, strict=True)
        ]
        instances.append(model.from_db(connection.alias, [f.attname for f in fields], converted))
    return instances


def server_side_binding() -> bool:
    return connection.settings_dict.get("OPTIONS", {}).get("server_side_binding") is True


def column_datetime(value: Any) -> datetime | None:
    """A datetime column read by raw SQL, as the ORM would give it: PostgreSQL returns aware
    datetimes; SQLite returns text or naive UTC datetimes (its declared column types do not
    survive a UNION)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and settings.USE_TZ and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return cast(datetime | None, value)


def thread_connections_release() -> None:
    """Give back this thread's database connections at the end of a unit of work (a request
    that answered or starts streaming, a reply step, before waiting on another thread's):
    to the pool (``DATABASE_POOL``), or closed with ``CONN_MAX_AGE=0``; a broken one is
    dropped. Persistent connections (``CONN_MAX_AGE`` > 0, no pool) stay, and so does a
    connection inside a transaction. The next query of the thread takes one again.

    Why: a pooled connection is the thread's until Django closes it, which it does only at
    a request's end (``request_finished``); a thread that is not a request's, or a request
    that streams for seconds, would keep one out of the pool meanwhile, and a request
    waiting on a reply step that needs one from the same pool could wait for ever."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()


P = ParamSpec("P")
R = TypeVar("R")


def connections_released(func: Callable[P, R]) -> Callable[P, R]:
    """``func``, then its thread's connections given back (:func:`thread_connections_release`):
    for ORM work run on a thread that is neither a request's nor a reply step's."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        finally:
            thread_connections_release()

    return call


#: PostgreSQL's answers that mean "not now": too many connections, out of connection slots,
#: the server starting or shutting down.
UNREACHABLE_STATES = frozenset({"53300", "53400", "57P01", "57P02", "57P03"})
#: The connection pool's: no connection free within ``DATABASE_POOL_TIMEOUT``, too many
#: waiting, the pool closed (the process stopping).
POOL_ERRORS = (psycopg_pool.PoolTimeout, psycopg_pool.TooManyRequests, psycopg_pool.PoolClosed)


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached (a refused or failed
    connection, no connection slot left, none free in the pool in time), as opposed to a
    statement that failed: then nothing was written, and the same request later can
    succeed."""
    if not isinstance(exc, DjangoOperationalError):
        return False
    cause = exc.__cause__
    if not isinstance(cause, psycopg.OperationalError):
        return False
    if isinstance(cause, POOL_ERRORS):
        return True
    state = cause.sqlstate or ""
    return (
        state in UNREACHABLE_STATES
        or state.startswith("08")
        or str(cause).startswith("connection failed")
    )
