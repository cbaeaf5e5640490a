"""Time limits, locks and redelivery of the background jobs: a task's hard time limit < the lock
it holds <= the Redis broker's visibility timeout, all a few minutes and derived from each
other in settings, so a task whose worker died is handed out again within minutes, finds its
lock expired and runs once; a delivery while a live run holds the lock does nothing."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

import chats.tasks
import summaries.tasks
from chatplatform.locks import exclusive, lock_key
from config.celery import app as celery_app
from summaries import tasks
from summaries.services import periodic, rolling
from tests.factories import make_conversation
from tests.summaries.helpers import (
    add_messages,
    current_rolling,
    db_snapshot,
    make_policy,
)

pytestmark = pytest.mark.django_db

OUR_TASKS = sorted(
    (
        task
        for name, task in celery_app.tasks.items()
        if name.split(".")[0] in {"chats", "summaries"}
    ),
    key=lambda task: task.name,
)
assert chats.tasks and summaries.tasks  # imported for their tasks


def test_the_limits_follow_from_each_other():
    assert settings.JOB_UNIT_SECONDS >= 2 * settings.LLM_TIMEOUT_SECONDS  # an answer and a retry
    soft, hard = settings.CELERY_TASK_SOFT_TIME_LIMIT, settings.CELERY_TASK_TIME_LIMIT
    assert soft >= settings.JOB_WORK_SECONDS + settings.JOB_UNIT_SECONDS
    assert soft < hard < settings.JOB_LOCK_SECONDS <= settings.JOB_VISIBILITY_SECONDS <= 10 * 60
    assert settings.JOB_RETRY_BACKOFF_MAX > 0
    assert hard + settings.JOB_RETRY_BACKOFF_MAX < settings.JOB_VISIBILITY_SECONDS
    assert rolling.LOCK_SECONDS == periodic.LOCK_SECONDS == settings.JOB_LOCK_SECONDS
    if settings.REDIS_URL:
        options: dict[str, Any] = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        assert options["visibility_timeout"] == settings.CELERY_VISIBILITY_TIMEOUT
        assert options["unacked_restore_interval"] <= 10  # a lost task is found in seconds


@pytest.mark.parametrize("task", OUR_TASKS, ids=lambda task: task.name)
def test_every_task_ends_before_its_lock_expires_and_its_retry_before_redelivery(task):
    hard = task.time_limit or celery_app.conf.task_time_limit
    soft = task.soft_time_limit or celery_app.conf.task_soft_time_limit
    assert soft < hard < settings.JOB_LOCK_SECONDS
    assert task.acks_late
    backoff = task.retry_backoff_max if getattr(task, "autoretry_for", ()) else 0
    assert hard + backoff < settings.JOB_VISIBILITY_SECONDS


@pytest.fixture
def chat(tenant_a, member_a):
    make_policy(tenant_a, strategy="hybrid")
    conversation = make_conversation(tenant_a, member_a, title="rolling")
    add_messages(conversation, 56, user=member_a, created_at=timezone.now() - timedelta(days=1))
    return conversation


def test_a_summary_task_holds_its_lock_for_the_job_lock_time(chat, tenant_a, monkeypatch):
    held: list[int] = []

    def recording(name: str, timeout: int):
        held.append(timeout)
        return exclusive(name, timeout)

    monkeypatch.setattr(rolling, "exclusive", recording)
    tasks.refresh_rolling_summary.apply(args=(tenant_a.pk, chat.pk)).get()
    assert held == [settings.JOB_LOCK_SECONDS]


def test_a_delivery_while_a_live_run_holds_the_lock_does_nothing(chat, tenant_a, eager_celery):
    name = f"rolling:t{tenant_a.pk}:c{chat.pk}"
    before = db_snapshot()
    with exclusive(name, settings.JOB_LOCK_SECONDS) as acquired:  # the first run, alive
        assert acquired
        second = tasks.refresh_rolling_summary.apply(args=(tenant_a.pk, chat.pk), task_id="b")
        assert second.get()["status"] == "locked"
    assert db_snapshot() == before


def test_a_task_whose_worker_died_runs_once_after_its_lock_expired(chat, tenant_a, eager_celery):
    # The first delivery took the lock and its worker was killed: nothing lets go of the lock,
    # which expires (here after 1 s; JOB_LOCK_SECONDS in production, before the broker's
    # visibility timeout hands the task out again).
    assert cache.add(lock_key(f"rolling:t{tenant_a.pk}:c{chat.pk}"), "first:dead", 1)
    early = tasks.refresh_rolling_summary.apply(args=(tenant_a.pk, chat.pk), task_id="other")
    assert early.get()["status"] == "locked"
    time.sleep(1.2)

    again = tasks.refresh_rolling_summary.apply(args=(tenant_a.pk, chat.pk), task_id="first")

    assert again.get()["status"] not in ("locked", "not_found")
    assert len(current_rolling(chat)) == 3
    after = db_snapshot()
    tasks.refresh_rolling_summary.apply(args=(tenant_a.pk, chat.pk), task_id="first").get()
    assert db_snapshot() == after  # a further delivery finds the work done
