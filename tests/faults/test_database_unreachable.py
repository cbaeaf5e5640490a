"""The database taking no more connections (PostgreSQL's "too many clients", a server
starting or stopping, no connection free in the pool in time): the API answers 503
``service_unavailable`` with ``Retry-After``, as when Redis is unreachable, never 500; a
statement that failed is still an error of ours."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError, ProgrammingError, connection
from psycopg_pool import PoolTimeout, TooManyRequests

from chatplatform.db import database_unreachable
from chatplatform.services import api_key_create
from chats.api.views import conversations as conversation_views
from tests.api.conftest import API, error_of, key_client


def wrapped(cause: Exception, kind: type[Exception] = OperationalError) -> Exception:
    """``cause`` as Django raises it (its own class, the driver's error as the cause)."""
    try:
        try:
            raise cause
        except Exception as exc:
            raise kind(str(exc)) from exc
    except Exception as error:
        return error


TOO_MANY = psycopg.OperationalError(
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, '
    "too many clients already"
)


def test_a_refused_connection_is_unreachable_and_a_failed_statement_is_not():
    assert database_unreachable(wrapped(TOO_MANY))
    assert database_unreachable(wrapped(psycopg.errors.TooManyConnections("no slot")))
    assert database_unreachable(wrapped(psycopg.errors.CannotConnectNow("starting up")))
    assert not database_unreachable(wrapped(psycopg.errors.DeadlockDetected("deadlock")))
    assert not database_unreachable(wrapped(psycopg.errors.UndefinedTable("x"), ProgrammingError))
    assert not database_unreachable(TOO_MANY)  # the driver's own, not through Django


@pytest.mark.django_db
def test_the_api_answers_503_with_retry_after(tenant_a, member_a, monkeypatch):
    client = key_client(api_key_create(tenant=tenant_a, name="k", user=member_a)[1])

    def refused(*args, **kwargs):
        raise wrapped(TOO_MANY)

    monkeypatch.setattr(conversation_views.ConversationListView, "get", refused)
    response = client.get(f"{API}/conversations/")
    error_of(response, 503, "service_unavailable")
    assert response["Retry-After"]


def test_no_connection_free_in_the_pool_in_time_is_unreachable():
    assert database_unreachable(wrapped(PoolTimeout("couldn't get a connection after 10.00 sec")))
    assert database_unreachable(wrapped(TooManyRequests("too many requests queued")))
    assert not database_unreachable(PoolTimeout("the pool's own, not through Django"))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_request_that_gets_no_pooled_connection_in_time_is_503(tenant_a, member_a, monkeypatch):
    """Every connection of the pool out (held by others) past the pool's timeout: the
    SDK-compatible API answers 503 in its protocol's shape, with Retry-After."""
    client = key_client(api_key_create(tenant=tenant_a, name="k", user=member_a)[1])
    connection.close()  # this thread's connection back to the pool
    pool = getattr(connection, "pool", None)
    if pool is None:
        pytest.skip("the connection pool is off (DATABASE_POOL=0)")
    monkeypatch.setattr(pool, "timeout", 0.3)
    held = []
    try:
        while pool.get_stats()["pool_size"] < pool.max_size or pool.get_stats()["pool_available"]:
            held.append(pool.getconn())
        response = client.get("/compat/openai/v1/models")
    finally:
        for raw in held:
            pool.putconn(raw)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "service_unavailable"
    assert response["Retry-After"]
