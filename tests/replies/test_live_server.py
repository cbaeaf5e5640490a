"""A real ASGI server process (uvicorn) on the Redis channel layer, driven by a real
WebSocket client: the reply survives a client that disconnects in the middle of it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from tests.fakes.behaviours import Reply
from tests.replies.test_pipeline_providers import use_model

ROOT = Path(__file__).resolve().parents[2]
REPLY = " ".join(f"word{i}" for i in range(40)) + "."

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def asgi_server(fake_anthropic):
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("needs PostgreSQL and Redis shared with a server process")
    db = connection.settings_dict
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "DEBUG": "1",
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--port",
            str(port),
            "--ws-max-size",
            "8388608",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=10)


def test_reply_completes_after_the_client_disconnects_mid_stream(
    asgi_server, fake_anthropic, tenant_a, member_a
):
    import websockets

    use_model(tenant_a, provider="anthropic")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="live")
    _, raw_key = api_key_create(tenant=tenant_a, name="live", user=member_a)
    fake_anthropic.script(Reply(REPLY, delay=0.03))
    url = f"ws://{asgi_server}/ws/conversations/{conversation.pk}/"

    async def chat() -> tuple[int, list[dict]]:
        async with websockets.connect(
            url,
            subprotocols=["chatplatform.v1", f"apikey.{raw_key}"],  # type: ignore[list-item]
            origin="http://127.0.0.1",  # type: ignore[arg-type]
        ) as ws:
            await ws.send(
                json.dumps(
                    {"type": "message", "client_id": "live-1", "content": "Tell me forty words"}
                )
            )
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if event["type"] == "delta":
                    return event["message_id"], [event]
        raise AssertionError("no delta")

    reply_id, first = asyncio.run(chat())  # the socket is closed after the first delta
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with tenant_scope(tenant_a):
            reply = Message.objects.get(pk=reply_id)
        if reply.status != "streaming":
            break
        time.sleep(0.1)
    assert reply.status == "complete"
    assert reply.content == REPLY

    async def resume() -> list[dict]:
        async with websockets.connect(
            url,
            subprotocols=["chatplatform.v1", f"apikey.{raw_key}"],  # type: ignore[list-item]
            origin="http://127.0.0.1",  # type: ignore[arg-type]
        ) as ws:
            await ws.send(
                json.dumps({"type": "resume", "message_id": reply_id, "last_seq": first[0]["seq"]})
            )
            events = []
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), 10))
                events.append(event)
                if event["type"] == "resync":
                    return events

    events = asyncio.run(resume())
    replayed = [e for e in events if e["type"] == "delta"]
    assert first[0]["text"] + "".join(e["text"] for e in replayed) == REPLY
    assert [e["seq"] for e in replayed] == list(range(2, 2 + len(replayed)))
    assert events[-1]["status"] == "complete"
