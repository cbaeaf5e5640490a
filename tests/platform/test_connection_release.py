"""A thread gives its database connections back at the end of each unit of work when they are
not kept between them (the connection pool, or ``CONN_MAX_AGE=0``): a streaming response
before it streams, a view before it waits on the reply pipeline, ORM work on a thread of its
own; a persistent connection stays, and so does one inside a transaction."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.test import RequestFactory

from chatplatform.db import connections_released, thread_connections_release
from chatplatform.middleware import StreamingConnectionsReleaseMiddleware
from chatplatform.models import Tenant
from chats.api.bridge import run_async

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def not_kept(monkeypatch) -> None:
    """Connections not kept between units of work, as with the pool (where it is so already)."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    connection.close()


def _query() -> int:
    return Tenant.objects.count()


def _view(streaming: bool) -> Any:
    def view(request: Any) -> HttpResponseBase:
        _query()
        if streaming:
            return StreamingHttpResponse(iter([b"data\n\n"]))
        return HttpResponse(b"{}")

    return view


@pytest.mark.usefixtures("not_kept")
def test_a_streaming_response_gives_the_connection_back_before_it_streams() -> None:
    request = RequestFactory().get("/")
    StreamingConnectionsReleaseMiddleware(_view(streaming=True))(request)
    assert connection.connection is None


@pytest.mark.usefixtures("not_kept")
def test_any_other_response_keeps_it_until_the_request_ends() -> None:
    request = RequestFactory().get("/")
    StreamingConnectionsReleaseMiddleware(_view(streaming=False))(request)
    assert connection.connection is not None  # request_finished closes it


@pytest.mark.usefixtures("not_kept")
def test_a_view_waiting_on_the_pipeline_gives_its_connection_back_first() -> None:
    _query()
    callers = connections["default"]  # this thread's; the coroutine runs on another
    seen: list[object] = []

    async def wait() -> None:
        seen.append(callers.connection)

    run_async(RequestFactory().get("/"), wait, timeout=10)
    assert seen == [None]
    _query()  # and takes one again when it next queries
    assert connection.connection is not None


@pytest.mark.usefixtures("not_kept")
def test_orm_work_run_apart_gives_its_connection_back() -> None:
    assert connections_released(_query)() >= 0
    assert connection.connection is None


@pytest.mark.usefixtures("not_kept")
def test_a_connection_in_a_transaction_stays() -> None:
    with transaction.atomic():
        _query()
        thread_connections_release()
        assert connection.connection is not None


def test_a_persistent_connection_stays(monkeypatch) -> None:
    if getattr(connection, "pool", None) is not None:
        pytest.skip("with the connection pool no connection persists")
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    connection.close()
    _query()
    thread_connections_release()
    assert connection.connection is not None
