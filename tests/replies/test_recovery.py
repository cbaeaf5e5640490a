"""Recovering from a runner that died mid-reply (its process was killed): the sweep sees the
expired runner lock at once, finishes the reply ``incomplete`` with the text streamed so far
(the delta log), unblocks the rolling summaries, answers the messages left waiting, and a
send again with the same client id regenerates the interrupted reply. A live runner (its lock
kept alive while it waits) is never taken for dead. Runs on SQLite with the in-process
coordination and on PostgreSQL with Redis (``DATABASE_URL`` and ``REDIS_URL``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings

from chatplatform.core.tokens import get_counter
from chatplatform.models.conversations import Message, Status
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import coordination as coordination_module
from chats.replies import recovery, runner
from chats.replies.coordination import coordination, keep_alive, runner_lock_name
from chats.replies.events import conversation_group
from chats.replies.turns import reply_content_flush
from chats.services import conversation_create
from chats.services.messages import message_create
from chats.tasks import mark_stale_replies
from summaries.services.storage import fetch_messages
from tests.durability.helpers import SdkProviders, conversation_rows, rows_async, wait_for_rows
from tests.durability.test_idempotency import api_client, model_calls, post
from tests.fakes import behaviours as b
from tests.replies.test_pipeline_providers import use_model
from tests.summaries.conftest import eager_celery  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.django_db(transaction=True)]

ANSWER = "A fresh answer from the model."
STREAMED = ["The first", " part, and", " the second."]


@pytest.fixture
def chat(tenant_a, member_a, fake_anthropic):
    use_model(tenant_a, provider="anthropic")
    runner.provider_factory_set(SdkProviders(anthropic_url=fake_anthropic.url))
    fake_anthropic.default_reply = b.Reply(ANSWER)
    return conversation_create(tenant=tenant_a, created_by=member_a, title="recovery")


def dead_reply(chat: Any, user: Any, client_id: str | None = None) -> tuple[Message, Message]:
    """A user message and a reply left ``streaming`` by a runner that died: its first delta
    was stored, all three are in the delta log, and no runner holds the lock."""
    question, _ = message_create(
        conversation=chat,
        role="user",
        content="Only once, please",
        author=user,
        client_id=client_id,
    )
    reply, _ = message_create(
        conversation=chat,
        role="assistant",
        content="",
        answers=question,
        status=Status.STREAMING,
        validate=False,
    )
    reply_content_flush(chat.tenant_id, reply.pk, STREAMED[0])
    return question, reply


async def log_deltas(reply: Message) -> None:
    for seq, text in enumerate(STREAMED, start=1):
        await coordination().append_delta(reply.tenant_id, reply.pk, seq, text)


async def in_own_loop(step: Any) -> Any:
    """``step(hub)`` then close the loop's coordination connections (a test's asyncio.run)."""
    hub = coordination()
    try:
        return await step(hub)
    finally:
        await hub.aclose()


def summarised_seqs(chat: Any) -> list[int]:
    """The messages a rolling summary may cover now (it stops before a streaming reply)."""
    fetched = fetch_messages(
        chat, first_seq=1, last_seq=100, limit=100, counter=get_counter("o200k_base"), bot_name="x"
    )
    return [m.seq for m in fetched.messages] if fetched else []


def reply_row(reply_id: int, tenant_id: int) -> Message:
    with tenant_scope(tenant_id):
        return Message.objects.get(pk=reply_id)


@pytest.mark.asyncio
async def test_a_dead_runner_is_recovered_at_once(chat, member_a, fake_anthropic):
    question, reply = await database_sync_to_async(dead_reply)(chat, member_a)
    await log_deltas(reply)
    waiting, _ = await database_sync_to_async(message_create)(
        conversation=chat, role="user", content="And a second question", author=member_a
    )
    assert await database_sync_to_async(summarised_seqs)(chat) == [question.seq]
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(chat.tenant_id, chat.pk), channel)

    swept = await recovery.sweep()

    assert swept.interrupted == [reply.pk]
    assert swept.handed_off == [(chat.tenant_id, chat.pk)]
    stored = await database_sync_to_async(reply_row)(reply.pk, chat.tenant_id)
    assert (stored.status, stored.content, stored.error_code) == (
        Status.INCOMPLETE,
        "".join(STREAMED),
        "interrupted",
    )
    assert stored.token_count == get_counter("o200k_base").count("".join(STREAMED))
    event = (await asyncio.wait_for(layer.receive(channel), 5))["event"]
    assert (event["type"], event["code"], event["message_id"]) == ("error", "interrupted", reply.pk)
    assert event["partial"] and event["retryable"] and event["last_seq"] == 3
    assert await database_sync_to_async(summarised_seqs)(chat) == [
        question.seq,
        reply.seq,
        waiting.seq,
    ]

    for tenant_id, conversation_id in swept.handed_off:  # as the sweeper or the task does
        await runner.replies_run(tenant_id, conversation_id)
    rows = await rows_async(chat)
    assert [(r["role"], r["status"]) for r in rows] == [
        ("user", "complete"),
        ("assistant", "incomplete"),
        ("user", "complete"),
        ("assistant", "complete"),
    ]
    assert rows[3]["answers_id"] == waiting.pk and rows[3]["content"] == ANSWER
    assert model_calls(fake_anthropic) == 1
    again = await recovery.sweep()  # idempotent: nothing left to finish or answer
    assert (again.interrupted, again.handed_off) == ([], [])


@pytest.mark.asyncio
async def test_a_live_runner_is_left_alone(chat, member_a):
    _, reply = await database_sync_to_async(dead_reply)(chat, member_a)
    hub = coordination()
    name = runner_lock_name(chat.tenant_id, chat.pk)
    token = await hub.acquire(name)
    assert token is not None

    swept = await recovery.sweep()

    assert (swept.interrupted, swept.handed_off) == ([], [])
    stored = await database_sync_to_async(reply_row)(reply.pk, chat.tenant_id)
    assert stored.status == Status.STREAMING
    await hub.release(name, token)
    assert (await recovery.sweep()).interrupted == [reply.pk]


@pytest.mark.asyncio
async def test_a_live_runner_keeps_its_lock_while_it_waits(monkeypatch):
    monkeypatch.setattr(coordination_module, "LOCK_REFRESH_SECONDS", 0.05)
    hub = coordination()
    token = await hub.acquire("keep-me", ttl=0.3)
    assert token is not None
    async with keep_alive(hub, "keep-me", token):
        await asyncio.sleep(0.8)  # a model slow to answer: longer than the lock's ttl
        assert await hub.acquire("keep-me") is None
    other = await hub.acquire("let-go", ttl=0.3)
    assert other is not None
    await asyncio.sleep(0.8)
    assert await hub.acquire("let-go") is not None  # without a holder the lock expires


@pytest.mark.asyncio
async def test_a_message_stored_by_a_process_that_died_is_answered(chat, member_a, fake_anthropic):
    stored, _ = await database_sync_to_async(message_create)(
        conversation=chat, role="user", content="Anyone there?", author=member_a
    )
    recent = await recovery.sweep()
    assert recent.handed_off == []  # just stored: its own process starts the runner
    await database_sync_to_async(_age_conversation)(chat, seconds=30)

    swept = await recovery.sweep()

    assert swept.handed_off == [(chat.tenant_id, chat.pk)]
    for key in swept.handed_off:
        await runner.replies_run(*key)
    rows = await rows_async(chat)
    assert [(r["role"], r["status"], r["answers_id"]) for r in rows][1] == (
        "assistant",
        "complete",
        stored.pk,
    )


def _age_conversation(chat: Any, seconds: int) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from chatplatform.models.conversations import Conversation

    with tenant_scope(chat.tenant_id):
        Conversation.objects.filter(pk=chat.pk).update(
            updated_at=timezone.now() - timedelta(seconds=seconds)
        )


def test_a_send_again_regenerates_an_interrupted_reply(chat, tenant_a, member_a, fake_anthropic):
    _, reply = dead_reply(chat, member_a, client_id="crash-1")
    asyncio.run(in_own_loop(lambda hub: log_deltas(reply)))
    swept = asyncio.run(recovery.sweep_once(locks_visible=True))
    assert swept.interrupted == [reply.pk]
    client = api_client(tenant_a, member_a)

    again = post(client, chat, "crash-1")

    body = again.json()
    assert (again.status_code, body["duplicate"], body["reply"]["id"]) == (200, True, reply.pk)
    assert (body["reply"]["status"], body["reply"]["content"]) == ("complete", ANSWER)
    rows = conversation_rows(chat)
    assert [(r["role"], r["status"]) for r in rows] == [
        ("user", "complete"),
        ("assistant", "complete"),
    ]
    assert rows[1]["error_code"] == ""
    # Complete now: a send again returns it as it is.
    third = post(client, chat, "crash-1")
    assert (third.status_code, third.json()["reply"]["content"]) == (200, ANSWER)
    assert model_calls(fake_anthropic) == 1


@override_settings(API_REPLY_WAIT_SECONDS=0.3)
def test_a_send_again_while_a_live_runner_streams_returns_that_reply(
    chat, tenant_a, member_a, fake_anthropic
):
    _, reply = dead_reply(chat, member_a, client_id="live-1")
    name = runner_lock_name(chat.tenant_id, chat.pk)
    token = asyncio.run(in_own_loop(lambda hub: hub.acquire(name)))
    assert token is not None  # its runner is alive

    again = post(api_client(tenant_a, member_a), chat, "live-1")

    assert again.status_code == 202
    assert (again.json()["reply"]["id"], again.json()["reply"]["status"]) == (reply.pk, "streaming")
    assert reply_row(reply.pk, chat.tenant_id).content == STREAMED[0]
    assert model_calls(fake_anthropic) == 0


@pytest.mark.usefixtures("eager_celery")
def test_beat_task_recovers_through_shared_locks(chat, member_a, fake_anthropic):
    if not recovery.shared_locks():
        pytest.skip("the beat task sees the runners' locks only on Redis (REDIS_URL)")
    dead_reply(chat, member_a)
    waiting, _ = message_create(
        conversation=chat, role="user", content="A second question", author=member_a
    )

    assert mark_stale_replies() == 1

    rows = conversation_rows(chat)
    assert [(r["role"], r["status"]) for r in rows] == [
        ("user", "complete"),
        ("assistant", "incomplete"),
        ("user", "complete"),
        ("assistant", "complete"),
    ]
    assert rows[3]["answers_id"] == waiting.pk and rows[3]["content"] == ANSWER
    assert mark_stale_replies() == 0


@pytest.mark.asyncio
async def test_the_web_process_sweeps_its_own_locks(chat, member_a, fake_anthropic):
    if recovery.shared_locks():
        assert recovery.sweeper_start() is None  # beat sweeps when the locks are on Redis
        return
    _, reply = await database_sync_to_async(dead_reply)(chat, member_a)
    await log_deltas(reply)
    waiting, _ = await database_sync_to_async(message_create)(
        conversation=chat, role="user", content="A second question", author=member_a
    )
    sweeper = recovery.sweeper_start(interval=0.1)
    assert sweeper is not None
    try:
        rows = await wait_for_rows(
            chat, lambda rows: len(rows) == 4 and rows[3]["status"] == "complete"
        )
    finally:
        await recovery.sweeper_stop()
    assert (rows[1]["status"], rows[1]["content"]) == ("incomplete", "".join(STREAMED))
    assert rows[3]["answers_id"] == waiting.pk and rows[3]["content"] == ANSWER


@pytest.mark.asyncio
async def test_the_asgi_lifespan_starts_and_stops_the_web_process_sweep(monkeypatch):
    from config import asgi

    async def no_warm_up() -> None:
        return None

    monkeypatch.setattr(asgi, "warm_up", no_warm_up)
    started: list[Any] = []
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "lifespan.startup"})

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.append(recovery._sweeper)
            inbox.put_nowait({"type": "lifespan.shutdown"})

    await asyncio.wait_for(asgi.application({"type": "lifespan"}, inbox.get, send), 10)
    if recovery.shared_locks():
        assert started == [None]  # beat sweeps
    else:
        assert started[0] is not None and started[0].done()  # stopped at shutdown
    assert recovery._sweeper is None
