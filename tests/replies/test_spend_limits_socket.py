"""Spending limits on the conversation WebSocket: a warning after the ``ack`` when a soft
limit is reached, an ``error`` with ``quota_exceeded`` (nothing stored) past a hard one."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from chatplatform.models import Tenant
from chatplatform.tenancy.scoping import all_tenants
from tests.replies.conftest import session_headers
from tests.replies.test_consumer import connect, receive_until, rows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def set_tenant_limit(tenant, **fields) -> None:
    with all_tenants():
        Tenant.objects.filter(pk=tenant.pk).update(**fields)


async def test_the_socket_warns_then_refuses(conversation, member_a, tenant_a):
    ws, connected, _ = await connect(
        conversation, await database_sync_to_async(session_headers)(member_a)
    )
    assert connected
    await ws.send_json_to({"type": "message", "client_id": "c1", "content": "Hello"})
    await receive_until(ws, "done")
    await database_sync_to_async(set_tenant_limit)(tenant_a, spend_soft_tokens=1)
    await ws.send_json_to({"type": "message", "client_id": "c2", "content": "Again"})
    events = await receive_until(ws, "done")
    assert [e["type"] for e in events][:2] == ["ack", "spend_warning"]
    assert "near its limit" in events[1]["message"]
    await database_sync_to_async(set_tenant_limit)(tenant_a, spend_hard_tokens=1)
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    await ws.send_json_to({"type": "message", "client_id": "c3", "content": "Refused"})
    refused = await ws.receive_json_from(timeout=10)
    assert refused["type"] == "error" and refused["code"] == "quota_exceeded"
    assert refused["client_id"] == "c3" and "limit is reached" in refused["message"]
    assert await database_sync_to_async(rows)(tenant_a, conversation) == stored
    await ws.disconnect()
