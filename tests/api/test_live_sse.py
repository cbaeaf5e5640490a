"""The event stream over real HTTP: uvicorn serving the ASGI application, read by httpx.

In process (a uvicorn thread sharing the test database and channel layer; any database) and,
on PostgreSQL + Redis, as a separate uvicorn process on the Redis channel layer, with the
model behind the fake Anthropic server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection

from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.services import conversation_create
from tests.api.live_server import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
REPLY = " ".join(f"word{i}" for i in range(30)) + "."

pytestmark = pytest.mark.django_db(transaction=True)


def read_events(response: httpx.Response) -> Iterator[tuple[float, str, dict[str, Any]]]:
    """``(arrival time, event, data)`` for each event as it arrives."""
    event, data = "", ""
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
        elif line == "" and event:
            yield time.monotonic(), event, json.loads(data)
            event, data = "", ""


def stream_reply(base_url: str, key: str, conversation_id: int, content: str, **extra: Any):
    with (
        httpx.Client(base_url=base_url, timeout=20) as client,
        client.stream(
            "POST",
            f"/api/v1/conversations/{conversation_id}/messages/",
            json={"content": content, **extra},
            headers={"Authorization": f"Bearer {key}", "Accept": "text/event-stream"},
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(read_events(response))


def test_reply_streams_over_http(live_url, tenant_a, member_a):
    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=0.005))
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="live")
    _, key = api_key_create(tenant=tenant_a, name="live", user=member_a)
    events = stream_reply(live_url, key, conversation.pk, "Hello", client_id="h-1")
    names = [name for _, name, _ in events]
    assert names[0] == "ack" and names[1] == "reply" and names[-1] == "done"
    deltas = [data for _, name, data in events if name == "delta"]
    assert len(deltas) >= 2 and [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    assert events[-1][0] > events[0][0]  # events arrived over time, not in one piece
    done = events[-1][2]
    assert done["status"] == "complete"
    with tenant_scope(tenant_a):
        reply = Message.objects.get(pk=done["message_id"])
    assert reply.content == "".join(d["text"] for d in deltas)

    again = stream_reply(live_url, key, conversation.pk, "Hello", client_id="h-1")
    assert [name for _, name, _ in again] == ["ack", "reply_state", "done"]
    assert again[0][2]["duplicate"] is True


def test_json_send_waits_for_the_reply_under_asgi(live_url, tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="json")
    _, key = api_key_create(tenant=tenant_a, name="json", user=member_a)
    url = f"{live_url}/api/v1/conversations/{conversation.pk}/messages/"
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "j-1"}
    first = httpx.post(url, json={"content": "Plain JSON"}, headers=headers, timeout=20)
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["reply"]["status"] == "complete" and body["duplicate"] is False
    again = httpx.post(url, json={"content": "Plain JSON"}, headers=headers, timeout=20)
    assert again.status_code == 200 and again.json()["reply"]["id"] == body["reply"]["id"]


def test_reply_is_stored_when_the_client_leaves_mid_stream(live_url, tenant_a, member_a):
    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=0.01))
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="leave")
    _, key = api_key_create(tenant=tenant_a, name="live", user=member_a)
    with (
        httpx.Client(base_url=live_url, timeout=20) as client,
        client.stream(
            "POST",
            f"/api/v1/conversations/{conversation.pk}/messages/",
            json={"content": "Talk to me"},
            headers={"Authorization": f"Bearer {key}", "Accept": "text/event-stream"},
        ) as response,
    ):
        for _, name, data in read_events(response):
            if name == "delta":
                reply_id = data["message_id"]
                break
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with tenant_scope(tenant_a):
            reply = Message.objects.get(pk=reply_id)
        if reply.status != "streaming":
            break
        time.sleep(0.1)
    assert reply.status == "complete" and reply.content.startswith("[offline")


def test_another_tenants_conversation_is_404_over_http(live_url, tenant_b, member_b, key_a):
    conversation = conversation_create(tenant=tenant_b, created_by=member_b)
    response = httpx.post(
        f"{live_url}/api/v1/conversations/{conversation.pk}/messages/",
        json={"content": "hi"},
        headers={"Authorization": f"Bearer {key_a}", "Accept": "text/event-stream"},
        timeout=10,
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.fixture
def server_process(fake_anthropic) -> Iterator[str]:
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
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.postgres
def test_reply_streams_from_a_server_process(server_process, fake_anthropic, tenant_a, member_a):
    from tests.fakes.behaviours import Reply
    from tests.replies.test_pipeline_providers import use_model

    use_model(tenant_a, provider="anthropic")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="process")
    _, key = api_key_create(tenant=tenant_a, name="process", user=member_a)
    fake_anthropic.script(Reply(REPLY, delay=0.01))
    events = stream_reply(server_process, key, conversation.pk, "Thirty words, please")
    names = [name for _, name, _ in events]
    assert names[0] == "ack" and names[-1] == "done", names
    deltas = [data for _, name, data in events if name == "delta"]
    assert "".join(d["text"] for d in deltas) == REPLY
    assert events[-1][2]["status"] == "complete"
    with tenant_scope(tenant_a):
        reply = Message.objects.get(pk=events[-1][2]["message_id"])
    assert reply.content == REPLY
