"""Scale-out on one machine: two ASGI server processes (uvicorn) on the Redis channel layer
and two Celery workers against one PostgreSQL. A client on process 1 and a client on
process 2 of the same group conversation both see the whole stream (the runner lives on
process 1; its deltas reach process 2 through the channel layer), and a summary task is
taken by exactly one worker."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from summaries import tasks
from tests.factories import make_conversation, make_member
from tests.fakes.behaviours import Reply
from tests.replies.test_pipeline_providers import use_model
from tests.scale.processes import django_env, start_uvicorn, start_worker, stop, wait_until
from tests.summaries.helpers import add_messages, current_rolling, make_policy

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

REPLY = " ".join(f"word{i}" for i in range(30)) + "."


@pytest.fixture
def cluster(tmp_path, fake_anthropic):
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL)")
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = django_env(
        url, settings.REDIS_URL, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake_anthropic.url
    )
    queue = f"test-scale-{uuid.uuid4().hex[:10]}"
    processes: list[Any] = []
    try:
        web = []
        for i in (1, 2):
            process, port = start_uvicorn(env, tmp_path / f"web-{i}.log")
            processes.append(process)
            web.append(port)
        logs = [tmp_path / f"worker-{i}.log" for i in (1, 2)]
        for i, log in enumerate(logs, start=1):
            processes.append(start_worker(env, queue, f"{queue}-{i}", log))
        yield web, queue, logs
    finally:
        for process in processes:
            stop(process)
        connection.close()


async def client(port: int, conversation_id: int, key: str, send: str | None) -> list[dict]:
    import websockets

    url = f"ws://127.0.0.1:{port}/ws/conversations/{conversation_id}/"
    async with websockets.connect(
        url,
        subprotocols=["chatplatform.v1", f"apikey.{key}"],  # type: ignore[list-item]
        origin="http://127.0.0.1",  # type: ignore[arg-type]
    ) as ws:
        if send is not None:
            await asyncio.sleep(0.5)  # the other client is connected by now
            await ws.send(json.dumps({"type": "message", "client_id": "c1", "content": send}))
        frames = []
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
            frames.append(frame)
            if frame["type"] in ("done", "error"):
                return frames


def test_two_asgi_processes_share_the_stream_and_one_worker_takes_a_task(
    cluster, fake_anthropic, tenant_a, member_a
):
    web, queue, logs = cluster
    use_model(tenant_a, provider="anthropic")
    other = make_member(tenant_a, username="second-member")
    conversation = conversation_create(
        tenant=tenant_a, created_by=member_a, title="group", participants=[other]
    )
    _, key_1 = api_key_create(tenant=tenant_a, name="p1", user=member_a)
    _, key_2 = api_key_create(tenant=tenant_a, name="p2", user=other)
    fake_anthropic.script(Reply(REPLY, delay=0.02))

    async def both() -> tuple[list[dict], list[dict]]:
        return await asyncio.gather(
            client(web[0], conversation.pk, key_1, "Hello group"),
            client(web[1], conversation.pk, key_2, None),
        )

    sender, watcher = asyncio.run(both())
    with tenant_scope(tenant_a):
        reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.status == "complete" and reply.content == REPLY
    for frames in (sender, watcher):
        deltas = [f for f in frames if f["type"] == "delta"]
        assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
        assert "".join(d["text"] for d in deltas) == REPLY
        assert frames[-1]["type"] == "done" and frames[-1]["message_id"] == reply.pk
    # The watcher on the other process also saw the group member's message itself.
    assert any(f["type"] == "message" and f["content"] == "Hello group" for f in watcher)

    make_policy(tenant_a)  # the offline (extractive) summarizer, rolling summaries
    chat = make_conversation(tenant_a, member_a)
    add_messages(chat, 36, user=member_a)
    result = tasks.refresh_rolling_summary.apply_async((tenant_a.pk, chat.pk), queue=queue)
    wait_until(lambda: len(current_rolling(chat)) == 3, 60, "the summaries")
    marker = f"[{result.id}] received"
    wait_until(lambda: sum(marker in log.read_text() for log in logs) >= 1, 30, "the log")
    assert sorted(log.read_text().count(marker) for log in logs) == [0, 1]
