"""200 WebSocket clients of four tenants, interleaved, at once: in process, against the real
ASGI application, consumer, reply runner and the configured channel layer (Redis when
``REDIS_URL`` is set). Every client sends one message and gets its events; no event and no row
crosses tenants (or conversations)."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client

from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.replies import runner
from chats.services import conversation_create
from config.asgi import application
from tests.factories import make_member, make_tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

TENANTS = 4
CONVERSATIONS = 10  # per tenant
SOCKETS = 5  # per conversation (the same user's tabs)
CLIENTS = TENANTS * CONVERSATIONS * SOCKETS


@dataclass
class Chat:
    tenant_id: int
    conversation_id: int
    label: str
    cookie: str
    messages: int = 0  # how many of its sockets send
    turn: Any = None  # held while a message is answered, where sends must not overlap


@dataclass
class Outcome:
    chat: Chat
    message_id: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


def build() -> list[Chat]:
    chats = []
    for t in range(TENANTS):
        tenant = make_tenant(f"Load {t}")
        for c in range(CONVERSATIONS):
            user = make_member(tenant, username=f"load-{t}-{c}")
            conversation = conversation_create(tenant=tenant, created_by=user, title=f"t{t}c{c}")
            client = Client()
            client.force_login(user)
            cookie = client.cookies["sessionid"].value
            chats.append(Chat(tenant.pk, conversation.pk, f"tenant{t}-chat{c}", cookie))
    return chats


async def one_client(
    chat: Chat, n: int, sends: bool, start: asyncio.Event, ready: list[int]
) -> Outcome:
    """Connect, wait for the start, send one message (if ``sends``), and collect events until
    every message of the conversation has its reply done."""
    headers = [(b"cookie", f"sessionid={chat.cookie}".encode()), (b"origin", b"http://testserver")]
    ws = WebsocketCommunicator(application, f"/ws/conversations/{chat.conversation_id}/", headers)
    connected, _ = await ws.connect(timeout=60)
    assert connected
    ready.append(n)
    outcome = Outcome(chat)
    await start.wait()
    if sends:
        async with chat.turn:
            await ws.send_json_to(
                {"type": "message", "client_id": f"load-{n}", "content": f"{chat.label} says {n}"}
            )
            await collect(ws, outcome, lambda: bool(outcome.message_id) and mine_done(outcome))
            if chat.messages == 1:  # one turn at a time: let its bookkeeping finish too
                while runner._background:
                    await asyncio.sleep(0.01)
    await collect(ws, outcome, lambda: done_count(outcome) >= chat.messages)
    await ws.disconnect()
    return outcome


async def collect(ws: WebsocketCommunicator, outcome: Outcome, enough: Any) -> None:
    while not enough():
        event = await ws.receive_json_from(timeout=60)
        outcome.events.append(event)
        if event["type"] == "ack":
            outcome.message_id = event["message_id"]
        assert event["type"] != "error", event


def mine_done(outcome: Outcome) -> bool:
    replies = {
        e["message_id"]
        for e in outcome.events
        if e["type"] == "reply" and e["answers"] == outcome.message_id
    }
    return any(e["type"] == "done" and e["message_id"] in replies for e in outcome.events)


def done_count(outcome: Outcome) -> int:
    return len({e["message_id"] for e in outcome.events if e["type"] == "done"})


def owners(ids: set[int]) -> dict[int, tuple[int, int]]:
    with all_tenants():
        return {
            pk: (tenant, conversation)
            for pk, tenant, conversation in Message.objects.filter(pk__in=ids).values_list(
                "pk", "tenant_id", "conversation_id"
            )
        }


def rows_by_tenant(chats: list[Chat]) -> dict[int, Counter[str]]:
    out: dict[int, Counter[str]] = {}
    for tenant_id in {c.tenant_id for c in chats}:
        labels = {c.label for c in chats if c.tenant_id == tenant_id}
        with tenant_scope(tenant_id):
            counts: Counter[str] = Counter()
            for role, status, content in Message.objects.values_list("role", "status", "content"):
                counts[f"{role}:{status}"] += 1
                if role == "user":
                    assert content.split(" says ")[0] in labels, (tenant_id, content)
            counts["turns"] = TurnRecord.objects.count()
            out[tenant_id] = counts
    return out


async def test_200_clients_of_four_tenants_never_cross(presets):
    """On PostgreSQL every client sends at once. SQLite's in-memory test database fails
    concurrent writers at once (instead of waiting as a file database does), so there the 200
    clients are connected and listening together, across tenants, while one client per
    conversation sends, one turn at a time (the reply's bookkeeping included)."""
    runner.provider_factory_set(lambda prepared: OfflineProvider())
    chats = await database_sync_to_async(build)()
    concurrent = connection.vendor == "postgresql"
    serial = asyncio.Lock()
    for chat in chats:
        chat.messages = SOCKETS if concurrent else 1
        chat.turn = asyncio.Lock() if concurrent else serial
    clients = [(chats[i % len(chats)], i) for i in range(CLIENTS)]
    random.Random(9).shuffle(clients)  # tenants interleaved
    senders = {id(chat): 0 for chat in chats}
    plan = []
    for chat, n in clients:
        plan.append((chat, n, senders[id(chat)] < chat.messages))
        senders[id(chat)] += 1
    start = asyncio.Event()
    began = time.monotonic()
    ready: list[int] = []
    tasks = [
        asyncio.create_task(one_client(chat, n, sends, start, ready)) for chat, n, sends in plan
    ]
    while len(ready) < CLIENTS:  # every socket is open before the first message
        await asyncio.sleep(0.02)
        assert not any(t.done() for t in tasks), [t.exception() for t in tasks if t.done()][:1]
    start.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
    while runner._background:  # replies still finishing their bookkeeping
        await asyncio.sleep(0.05)
    elapsed = time.monotonic() - began

    # Every event names only messages of the client's own conversation (and tenant).
    ids = {e[k] for o in outcomes for e in o.events for k in ("message_id", "answers") if k in e}
    owner = await database_sync_to_async(owners)(ids)
    assert set(owner) == ids, "events named messages that do not exist"
    crossed = [
        (o.chat.label, e)
        for o in outcomes
        for e in o.events
        for k in ("message_id", "answers")
        if k in e and owner[e[k]] != (o.chat.tenant_id, o.chat.conversation_id)
    ]
    assert not crossed, crossed[:5]
    for o in outcomes:
        texts = [e.get("content", "") for e in o.events if e["type"] == "message"]
        assert all(t.startswith(o.chat.label + " says") for t in texts), (o.chat.label, texts)
        assert done_count(o) == o.chat.messages

    assert sum(1 for o in outcomes if o.message_id) == sum(c.messages for c in chats)

    # Rows per tenant: one user message and one complete reply per send, one turn each.
    per_tenant = chats[0].messages * CONVERSATIONS
    expected = Counter({"user:complete": per_tenant, "assistant:complete": per_tenant})
    expected["turns"] = per_tenant
    assert await database_sync_to_async(rows_by_tenant)(chats) == {
        c.tenant_id: expected for c in chats
    }
    assert elapsed < 90, f"{CLIENTS} clients took {elapsed:.1f} s"
