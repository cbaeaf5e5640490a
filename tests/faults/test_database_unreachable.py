"""The database taking no more connections (PostgreSQL's "too many clients", a server
starting or stopping): the API answers 503 ``service_unavailable`` with ``Retry-After``, as
when Redis is unreachable, never 500; a statement that failed is still an error of ours."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError, ProgrammingError

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
