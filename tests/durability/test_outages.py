"""Redis stopped for 30 s, then PostgreSQL restarted, while clients chat.

A throwaway redis-server (append-only file, as a production broker) and a throwaway
PostgreSQL cluster on free ports, an ASGI server (uvicorn) and a Celery worker on them; the
test stops and restarts those two servers only (never the machine's shared ones). During an
outage requests fail cleanly (a JSON 5xx or a closed socket, within seconds, never a hang);
after it, clients reconnect and resync, chat again, and tasks run again. Nothing a client was
told is stored (an ack, a 201) is lost, and no reply is left ``streaming``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx
import psycopg
import pytest

from tests.scale.processes import (
    ROOT,
    PostgresCluster,
    RedisServer,
    django_env,
    start_uvicorn,
    start_worker,
    stop,
    wait_until,
)

pytestmark = [pytest.mark.slow]

REDIS_OUTAGE_SECONDS = 30
SETUP = """
import json
from chatplatform.services import api_key_create
from chats.services import conversation_create
from tests.factories import make_member, make_tenant
from tests.factories import make_conversation
from tests.summaries.helpers import add_messages, make_policy

tenant = make_tenant("Outage")
user = make_member(tenant, username="outage-user")
chat = conversation_create(tenant=tenant, created_by=user, title="outage")
_, key = api_key_create(tenant=tenant, name="outage", user=user)
make_policy(tenant)
long_chat = make_conversation(tenant, user)
add_messages(long_chat, 36, user=user)
print(json.dumps({"tenant": tenant.pk, "chat": chat.pk, "key": key, "long": long_chat.pk}))
"""


@pytest.fixture
def stack(tmp_path):
    redis = RedisServer(tmp_path / "redis").start()
    postgres = PostgresCluster().init()
    env = django_env(postgres.url, redis.url)
    processes: list[Any] = []
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
        )
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SETUP],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=120,
            capture_output=True,
            text=True,
        ).stdout
        data = json.loads(out.strip().splitlines()[-1])
        web, port = start_uvicorn(env, tmp_path / "web.log")
        processes.append(web)
        queue = f"test-outage-{uuid.uuid4().hex[:8]}"
        processes.append(start_worker(env, queue, queue, tmp_path / "worker.log"))
        yield {
            **data,
            "port": port,
            "queue": queue,
            "env": env,
            "redis": redis,
            "postgres": postgres,
            "tmp": tmp_path,
        }
    finally:
        for process in processes:
            stop(process)
        redis.stop()
        postgres.destroy()


def sql(stack: dict[str, Any], query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["postgres"].url, connect_timeout=5) as conn:
        cursor = conn.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def post(stack: dict[str, Any], content: str, key: str, timeout: float = 20) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{stack['port']}/api/v1/conversations/{stack['chat']}/messages/",
        json={"content": content},
        headers={"Authorization": f"Bearer {stack['key']}", "Idempotency-Key": key},
        timeout=timeout,
    )


async def ws_chat(stack: dict[str, Any], frames: list[dict[str, Any]], *sends: dict) -> None:
    """Connect, send ``sends`` one after another, each until its reply ends."""
    import websockets

    url = f"ws://127.0.0.1:{stack['port']}/ws/conversations/{stack['chat']}/"
    async with websockets.connect(
        url,
        subprotocols=["chatplatform.v1", f"apikey.{stack['key']}"],  # type: ignore[list-item]
        origin="http://127.0.0.1",  # type: ignore[arg-type]
        open_timeout=10,
    ) as ws:
        for frame in sends:
            await ws.send(json.dumps(frame))
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), 20))
                frames.append(event)
                if event["type"] in ("done", "error") or (
                    event["type"] == "resync" and event["status"] != "streaming"
                ):
                    break


def clean_failure(attempt: Any) -> str:
    """Run ``attempt``; it must fail or answer within 20 s. Returns what happened."""
    started = time.monotonic()
    try:
        outcome = attempt()
    except Exception as exc:  # a refused or closed socket is a clean failure
        outcome = f"raised {type(exc).__name__}"
    assert time.monotonic() - started < 25, "the request hung during the outage"
    return str(outcome)


def check_nothing_lost(stack: dict[str, Any], acked_client_ids: set[str]) -> None:
    stored = {
        row[0]
        for row in sql(
            stack,
            "SELECT client_id FROM chats_message WHERE conversation_id = %s AND role = 'user'",
            stack["chat"],
        )
    }
    assert acked_client_ids <= stored
    streaming = sql(stack, "SELECT id FROM chats_message WHERE status = 'streaming'")
    assert streaming == []


def rolling_summaries(stack: dict[str, Any]) -> int:
    return sql(
        stack,
        "SELECT count(*) FROM summaries_summary WHERE conversation_id = %s",
        stack["long"],
    )[0][0]


def enqueue_summary(stack: dict[str, Any]) -> None:
    """Send the rolling-summary task to the stack's worker through its Redis."""
    code = (
        "from summaries import tasks; "
        f"tasks.refresh_rolling_summary.apply_async(({stack['tenant']}, {stack['long']}), "
        f"queue={stack['queue']!r})"
    )
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=stack["env"],
        check=True,
        timeout=60,
    )


def test_redis_outage(stack):
    acked: set[str] = set()
    before = post(stack, "Before the outage", "before")
    assert before.status_code == 201 and before.json()["reply"]["status"] == "complete"
    acked.add("before")
    first_reply = before.json()["reply"]["id"]

    # --- Redis down for 30 s -------------------------------------------------------------------
    stack["redis"].stop()
    outage_ends = time.monotonic() + REDIS_OUTAGE_SECONDS
    outcomes = []
    n = 0
    while time.monotonic() < outage_ends - 5:
        n += 1
        response = None

        def attempt(n: int = n) -> Any:
            nonlocal response
            response = post(stack, f"During the outage {n}", f"during-{n}")
            return response.status_code

        outcomes.append(clean_failure(attempt))
        if response is not None:
            if response.status_code in (200, 201, 202):
                acked.add(f"during-{n}")  # if it was accepted, it must be kept
            else:
                assert response.status_code >= 500
        tried: list[dict[str, Any]] = []
        outcomes.append(
            clean_failure(
                lambda tried=tried, n=n: asyncio.run(
                    ws_chat(
                        stack,
                        tried,
                        {"type": "message", "client_id": f"ws-during-{n}", "content": "hi"},
                    )
                )
            )
        )
        if any(f["type"] == "ack" for f in tried):
            acked.add(f"ws-during-{n}")
        time.sleep(1)
    time.sleep(max(0.0, outage_ends - time.monotonic()))
    assert outcomes
    stack["redis"].start()

    # Clients come back: resync the reply from before, chat again, over both transports.
    frames: list[dict[str, Any]] = []
    wait_until(
        lambda: post(stack, "After the outage", "after").status_code == 201,
        60,
        "the API to answer again",
    )
    acked.add("after")
    asyncio.run(
        ws_chat(
            stack,
            frames,
            {"type": "resume", "message_id": first_reply, "last_seq": 0},
            {"type": "message", "client_id": "ws-after", "content": "Back again"},
        )
    )
    acked.add("ws-after")
    kinds = [f["type"] for f in frames]
    assert "resync" in kinds and frames[-1]["type"] == "done"
    resync = next(f for f in frames if f["type"] == "resync")
    assert resync["status"] == "complete" and resync["content"]
    # Tasks run again through the restarted broker.
    enqueue_summary(stack)
    wait_until(lambda: rolling_summaries(stack) > 0, 60, "the summary task after the outage")
    check_nothing_lost(stack, acked)


def test_postgres_restart(stack):
    acked: set[str] = set()
    before = post(stack, "Before the restart", "before")
    assert before.status_code == 201 and before.json()["reply"]["status"] == "complete"
    acked.add("before")
    stack["postgres"].stop("fast")
    down = clean_failure(lambda: post(stack, "While PostgreSQL is down", "pg-down").status_code)
    assert down.startswith("raised") or int(down) >= 500
    stack["postgres"].start()
    wait_until(
        lambda: post(stack, "After the restart", "pg-after").status_code == 201,
        60,
        "the API after the database restart",
    )
    acked.add("pg-after")
    frames: list[dict[str, Any]] = []
    asyncio.run(
        ws_chat(stack, frames, {"type": "message", "client_id": "ws-pg", "content": "Still here"})
    )
    assert frames[-1]["type"] == "done" and frames[-1]["status"] == "complete"
    acked.add("ws-pg")
    summaries_before = rolling_summaries(stack)
    sql(stack, "DELETE FROM summaries_summary WHERE conversation_id = %s", stack["long"])
    enqueue_summary(stack)
    wait_until(
        lambda: rolling_summaries(stack) == summaries_before, 60, "the task after the restart"
    )
    check_nothing_lost(stack, acked)
