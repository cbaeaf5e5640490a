"""Redis (the broker) restarted while a Celery worker is in the middle of a task: the worker
reconnects and runs the next task within seconds, and the task it held is not lost.

A throwaway redis-server of the test's own (append-only, as a production broker) on a free
port, never the machine's shared one; a real worker on it and on the test's PostgreSQL; the
summary's model is the fake Anthropic server, slowed down so that the restart lands while
the worker waits for it.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection

from chats.token_counts import tasks as token_tasks
from config.celery import app
from summaries import tasks
from tests.factories import make_conversation
from tests.fakes.behaviours import Reply
from tests.jobs.test_worker import uncounted
from tests.scale.processes import RedisServer, django_env, start_worker, stop, wait_until
from tests.summaries.helpers import add_messages, current_rolling, make_policy, priced_profile

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

GOOD = json.dumps(
    {
        "summary": "The team planned the Lisbon launch and the budget in detail.",
        "facts": ["Launch on March 14, 2025"],
        "open_questions": [],
    }
)
#: The model's first answer streams one word this often (about eight seconds in all): the
#: broker restarts while the task waits for it.
SECONDS_PER_WORD = 0.4


@pytest.fixture
def stack(tmp_path, fake_anthropic, tenant_a, member_a):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): the worker is a separate process")
    redis = RedisServer(tmp_path / "redis").start()
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = django_env(
        url,
        redis.url,
        ANTHROPIC_API_KEY="sk-test",
        ANTHROPIC_BASE_URL=fake_anthropic.url,
        CELERY_VISIBILITY_TIMEOUT="10",
    )
    make_policy(tenant_a, model_profile=priced_profile(tenant_a))
    chat = make_conversation(tenant_a, member_a)
    add_messages(chat, 36, user=member_a)
    legacy = make_conversation(tenant_a, member_a)
    add_messages(legacy, 10, user=member_a, counted=False)
    fake_anthropic.script(Reply(GOOD, delay=SECONDS_PER_WORD))
    default = fake_anthropic.default_reply
    fake_anthropic.default_reply = Reply(GOOD)
    processes: list = []
    try:
        yield {"env": env, "redis": redis, "chat": chat, "processes": processes}
    finally:
        fake_anthropic.default_reply = default
        for process in processes:
            stop(process)
        redis.stop()
        connection.close()


def send(redis: RedisServer, task, *args, queue: str, **kwargs) -> None:
    """Send ``task`` to the worker through the test's own Redis."""
    with app.connection_for_write(redis.url) as broker:
        task.apply_async(args, kwargs, queue=queue, connection=broker)


@pytest.mark.parametrize("pool", ["prefork", "solo"])
def test_a_broker_restart_under_a_busy_worker(stack, tmp_path, fake_anthropic, tenant_a, pool):
    redis, chat = stack["redis"], stack["chat"]
    queue = f"test-restart-{uuid.uuid4().hex[:10]}"
    log = tmp_path / "worker.log"
    worker = start_worker(stack["env"], queue, queue, log, pool=pool)
    stack["processes"].append(worker)
    send(redis, tasks.refresh_rolling_summary, chat.tenant_id, chat.pk, queue=queue)
    wait_until(
        lambda: len(fake_anthropic.requests_to("/v1/messages")) >= 1,
        60,
        f"the model call\n{log.read_text()}",
    )

    redis.stop()  # mid-task: the worker holds the task and waits for the model
    redis.start()

    send(redis, token_tasks.backfill_token_counts, queue=queue, tenant_id=tenant_a.pk)
    wait_until(lambda: uncounted(tenant_a) == 0, 60, f"the next task\n{log.read_text()}")
    wait_until(lambda: len(current_rolling(chat)) == 3, 60, f"the summaries\n{log.read_text()}")
    assert worker.poll() is None, log.read_text()
    assert "Unrecoverable error" not in log.read_text()
