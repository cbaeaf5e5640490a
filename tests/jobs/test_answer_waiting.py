"""The job that answers the messages a dead process left waiting answers one per run and
hands the rest on to a run of its own, so a long queue never runs into the job's time limit
and every waiting message gets its reply, once. Runs on SQLite with the in-process
coordination and on PostgreSQL with Redis (``DATABASE_URL`` and ``REDIS_URL``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatplatform.models.conversations import Message
from chats import tasks
from chats.replies import runner
from chats.replies.coordination import runner_lock_name
from chats.services import conversation_create
from chats.services.messages import message_create
from tests.durability.helpers import SdkProviders, conversation_rows
from tests.durability.test_idempotency import model_calls
from tests.fakes import behaviours as b
from tests.replies.test_pipeline_providers import use_model
from tests.replies.test_recovery import in_own_loop

pytestmark = [pytest.mark.django_db(transaction=True)]

WAITING = 5
ANSWER = "An answer at last."


@pytest.fixture
def chat(tenant_a, member_a, fake_anthropic):
    use_model(tenant_a, provider="anthropic")
    runner.provider_factory_set(SdkProviders(anthropic_url=fake_anthropic.url))
    fake_anthropic.default_reply = b.Reply(ANSWER)
    return conversation_create(tenant=tenant_a, created_by=member_a, title="left waiting")


@pytest.fixture
def queued(monkeypatch) -> list[tuple[Any, ...]]:
    """The runs the job hands on, kept here instead of sent to a broker."""
    runs: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.answer_waiting_messages, "delay", lambda *args: runs.append(args))
    return runs


def left_waiting(chat: Any, user: Any, count: int = WAITING) -> list[Message]:
    """User messages stored by a process that died before it answered them."""
    return [
        message_create(conversation=chat, role="user", content=f"Question {n}", author=user)[0]
        for n in range(1, count + 1)
    ]


def answers(chat: Any) -> dict[int, list[tuple[str, str]]]:
    """Each user message's replies, as (status, content)."""
    rows = conversation_rows(chat)
    found: dict[int, list[tuple[str, str]]] = {r["pk"]: [] for r in rows if r["role"] == "user"}
    for row in rows:
        if row["role"] == "assistant":
            found[row["answers_id"]].append((row["status"], row["content"]))
    return found


def drain(queued: list[tuple[Any, ...]], limit: int = 50) -> int:
    """Run the handed-on runs in order, as a worker would; returns how many ran."""
    ran = 0
    while queued:
        assert ran < limit, "the job keeps handing itself on"
        tasks.answer_waiting_messages(*queued.pop(0))
        ran += 1
    return ran


def test_each_waiting_message_gets_its_reply_one_per_run(chat, member_a, fake_anthropic, queued):
    waiting = left_waiting(chat, member_a)

    tasks.answer_waiting_messages(chat.tenant_id, chat.pk)

    # One run answered the oldest message only, and handed the rest on.
    after_one = answers(chat)
    assert after_one[waiting[0].pk] == [("complete", ANSWER)]
    assert all(after_one[m.pk] == [] for m in waiting[1:])
    assert queued == [(chat.tenant_id, chat.pk, [waiting[0].pk])]

    assert drain(queued) == WAITING - 1

    assert answers(chat) == {m.pk: [("complete", ANSWER)] for m in waiting}
    assert model_calls(fake_anthropic) == WAITING


def test_a_second_chain_answers_nothing_twice(chat, member_a, fake_anthropic, queued):
    """The sweep handed the conversation off twice: both chains run, interleaved; every
    message is answered once."""
    waiting = left_waiting(chat, member_a, 3)
    queued.extend([(chat.tenant_id, chat.pk), (chat.tenant_id, chat.pk)])

    drain(queued)

    assert answers(chat) == {m.pk: [("complete", ANSWER)] for m in waiting}
    assert model_calls(fake_anthropic) == 3
    # Once all are answered, a run changes nothing and hands nothing on.
    tasks.answer_waiting_messages(chat.tenant_id, chat.pk)
    assert queued == [] and model_calls(fake_anthropic) == 3


def test_a_conversation_being_answered_is_left_to_its_runner(
    chat, member_a, fake_anthropic, queued
):
    waiting = left_waiting(chat, member_a, 2)
    name = runner_lock_name(chat.tenant_id, chat.pk)
    token = asyncio.run(in_own_loop(lambda hub: hub.acquire(name)))
    assert token is not None  # a live runner answers this conversation

    tasks.answer_waiting_messages(chat.tenant_id, chat.pk)

    assert answers(chat) == {m.pk: [] for m in waiting}
    assert queued == [] and model_calls(fake_anthropic) == 0
    asyncio.run(in_own_loop(lambda hub: hub.release(name, token)))


def test_a_reply_that_fails_is_not_retried_by_the_same_chain(
    chat, member_a, fake_anthropic, queued
):
    """The chain is one runner spread over runs: a failed reply stays failed (the user sends
    it again to retry) instead of handing the job on forever."""
    waiting = left_waiting(chat, member_a, 2)
    fake_anthropic.default_reply = b.invalid_request()

    tasks.answer_waiting_messages(chat.tenant_id, chat.pk)
    ran = drain(queued)

    assert ran == 1
    assert [status for m in waiting for status, _ in answers(chat)[m.pk]] == [
        "failed",
        "failed",
    ]
    assert model_calls(fake_anthropic) == 2
