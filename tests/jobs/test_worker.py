"""The tasks through a real Celery worker on the Redis broker (PostgreSQL + Redis only).

The worker is a separate process started with the test database's URL, so it sees what the
test commits (``transaction=True``). It consumes a queue of its own, so no other worker on
the same Redis can take these tasks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.token_counts import tasks as token_tasks
from summaries import tasks
from tests.factories import make_conversation
from tests.summaries.helpers import (
    add_messages,
    current_rolling,
    db_snapshot,
    make_policy,
    summaries_of,
)

BASE_DIR = Path(settings.BASE_DIR)


def wait_until(condition, timeout=90.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def uncounted(tenant):
    with tenant_scope(tenant):
        return Message.objects.filter(token_count__isnull=True).count()


@pytest.fixture
def worker(tmp_path):
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL)")
    db = connection.settings_dict
    url = (
        f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )
    queue = f"test-summaries-{uuid.uuid4().hex[:12]}"
    log = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": url,
        "REDIS_URL": settings.REDIS_URL,
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config.celery",
                "worker",
                "-Q",
                queue,
                "-n",
                f"{queue}@%h",
                "--pool",
                "solo",
                "--concurrency",
                "1",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "INFO",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: "ready" in log.read_text() or process.poll() is not None,
            60,
            "the worker to start",
        )
        assert process.poll() is None, log.read_text()
        yield queue, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_tasks_run_in_a_real_worker_idempotently_and_per_tenant(
    worker, tenant_a, tenant_b, member_a, member_b
):
    queue, log = worker
    make_policy(tenant_a, strategy="hybrid")
    make_policy(tenant_b, strategy="hybrid")
    chat = make_conversation(tenant_a, member_a)
    add_messages(chat, 36, user=member_a)
    legacy = make_conversation(tenant_a, member_a)
    add_messages(legacy, 50, user=member_a, counted=False)
    theirs = make_conversation(tenant_b, member_b)
    add_messages(theirs, 36, user=member_b, counted=False)

    tasks.refresh_rolling_summary.apply_async((tenant_a.pk, chat.pk), queue=queue)
    wait_until(lambda: len(current_rolling(chat)) == 3, what=f"summaries\n{log.read_text()}")
    token_tasks.backfill_token_counts.apply_async(kwargs={"tenant_id": tenant_a.pk}, queue=queue)
    wait_until(lambda: uncounted(tenant_a) == 0, what=f"the backfill\n{log.read_text()}")
    snapshot = db_snapshot()

    # Second runs, and tenant A's id with tenant B's conversation; the solo worker runs the
    # queue in order, so once the marker task (B's own backfill) is done, they all ran.
    tasks.refresh_rolling_summary.apply_async((tenant_a.pk, chat.pk), queue=queue)
    token_tasks.backfill_token_counts.apply_async(kwargs={"tenant_id": tenant_a.pk}, queue=queue)
    tasks.refresh_rolling_summary.apply_async((tenant_a.pk, theirs.pk), queue=queue)
    tasks.refresh_periodic_summary.apply_async((tenant_a.pk, theirs.pk), queue=queue)
    tasks.summarize_for_continuation.apply_async((tenant_a.pk, theirs.pk), queue=queue)
    before_marker = db_snapshot()
    assert before_marker == snapshot
    token_tasks.backfill_token_counts.apply_async(kwargs={"tenant_id": tenant_b.pk}, queue=queue)
    wait_until(lambda: uncounted(tenant_b) == 0, what=f"the marker\n{log.read_text()}")

    after = db_snapshot()
    assert after["summaries"] == snapshot["summaries"]
    assert summaries_of(theirs) == []
    mine = {pk: v for pk, *v in snapshot["messages"]}
    for pk, count, counter in after["messages"]:
        if pk in mine:
            with tenant_scope(tenant_a):
                if Message.objects.filter(pk=pk).exists():
                    assert [count, counter] == mine[pk]
    text = log.read_text()
    assert "not_found" in text and "succeeded" in text
