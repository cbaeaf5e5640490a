"""A Celery worker killed with ``kill -9`` in the middle of a summary task: the task runs
again (acks_late + reject_on_worker_lost for a lost pool child; the Redis visibility timeout
for a lost worker) and the summary is stored once. Real workers on the Redis broker and the
test's PostgreSQL; the summary's model is the fake Anthropic server, slowed down so the kill
lands while the task holds its lock and waits for the model.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.conf import settings
from django.db import connection

from summaries import tasks
from tests.factories import make_conversation
from tests.fakes.behaviours import Reply
from tests.scale.processes import (
    children,
    django_env,
    kill9,
    start_worker,
    stop,
    wait_until,
)
from tests.summaries.helpers import (
    add_messages,
    current_rolling,
    make_policy,
    priced_profile,
    summaries_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

GOOD = json.dumps(
    {
        "summary": "The team planned the Lisbon launch and the budget in detail.",
        "facts": ["Launch on March 14, 2025", "Budget €12,000"],
        "open_questions": ["Was invoice INV-2291 paid?"],
    }
)


@pytest.fixture
def setup(tmp_path, fake_anthropic, tenant_a, member_a):
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL)")
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = django_env(
        url,
        settings.REDIS_URL,
        ANTHROPIC_API_KEY="sk-test",
        ANTHROPIC_BASE_URL=fake_anthropic.url,
        CELERY_VISIBILITY_TIMEOUT="6",
    )
    make_policy(tenant_a, model_profile=priced_profile(tenant_a))
    chat = make_conversation(tenant_a, member_a)
    add_messages(chat, 36, user=member_a)
    # The first model call is slow (the kill lands in it); every later one answers at once.
    fake_anthropic.script(Reply(GOOD, delay=1.0))
    default = fake_anthropic.default_reply
    fake_anthropic.default_reply = Reply(GOOD)
    queue = f"test-kill-{uuid.uuid4().hex[:10]}"
    processes: list = []
    yield env, queue, chat, processes
    fake_anthropic.default_reply = default
    for process in processes:
        stop(process)
    connection.close()


def model_calls(fake) -> int:
    return len(fake.requests_to("/v1/messages"))


def received(log, task_id: str) -> int:
    return log.read_text().count(f"[{task_id}] received")


def test_killed_pool_child_gets_its_task_redelivered(setup, tmp_path, fake_anthropic):
    env, queue, chat, processes = setup
    log = tmp_path / "worker.log"
    worker = start_worker(env, queue, f"{queue}-1", log, pool="prefork")
    processes.append(worker)
    result = tasks.refresh_rolling_summary.apply_async((chat.tenant_id, chat.pk), queue=queue)
    wait_until(lambda: model_calls(fake_anthropic) >= 1, 60, f"the model call\n{log.read_text()}")
    (child,) = children(worker.pid)
    kill9(child)  # mid-task: the lock is held, the model is answering

    wait_until(
        lambda: received(log, result.id) >= 2, 60, f"the task to come back\n{log.read_text()}"
    )
    text = log.read_text()
    assert "WorkerLostError" in text or "signal 9" in text
    assert worker.poll() is None  # the worker itself lives on with a new child


def test_killed_worker_task_runs_again_and_stores_the_summary_once(setup, tmp_path, fake_anthropic):
    env, queue, chat, processes = setup
    first_log, second_log = tmp_path / "worker-1.log", tmp_path / "worker-2.log"
    first = start_worker(env, queue, f"{queue}-1", first_log, pool="solo")
    processes.append(first)
    result = tasks.refresh_rolling_summary.apply_async((chat.tenant_id, chat.pk), queue=queue)
    wait_until(lambda: model_calls(fake_anthropic) >= 1, 60, "the model call")
    kill9(first.pid)  # the whole worker: its delivery stays unacknowledged in Redis
    first.wait(10)
    second = start_worker(env, queue, f"{queue}-2", second_log, pool="solo")
    processes.append(second)
    # After the visibility timeout Redis hands the task to the surviving worker.
    wait_until(
        lambda: received(second_log, result.id) >= 1, 60, f"redelivery\n{second_log.read_text()}"
    )
    wait_until(
        lambda: len(current_rolling(chat)) == 3,
        30,
        f"the summaries\n{second_log.read_text()}",
    )
    rows = summaries_of(chat, kind="rolling")
    spans = [(s.first_seq, s.last_seq, s.level) for s in rows]
    assert len(spans) == len(set(spans))  # each span stored once
