"""The Celery tasks: idempotent, tenant-safe, retry only transient errors, bounded in time,
deduplicated per beat run; schedules in the database; one beat at a time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import OperationalError
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from chats.token_counts import tasks as token_tasks
from config.celery import app as celery_app
from summaries import tasks
from summaries.summarizer import SummaryUnavailable
from tests.factories import make_conversation
from tests.summaries.helpers import (
    add_messages,
    current_rolling,
    db_snapshot,
    make_policy,
    summaries_of,
)

pytestmark = pytest.mark.django_db

SUMMARY_TASKS = [
    tasks.refresh_rolling_summary,
    tasks.summarize_for_continuation,
    tasks.refresh_periodic_summary,
    tasks.refresh_periodic_summaries,
]
ALL_TASKS = [*SUMMARY_TASKS, token_tasks.backfill_token_counts]


@pytest.fixture
def world(tenant_a, tenant_b, member_a, member_b):
    """Two tenants with conversations needing every kind of work."""
    make_policy(tenant_a, strategy="hybrid")
    make_policy(tenant_b, strategy="hybrid")
    now = timezone.now()
    rolling = make_conversation(tenant_a, member_a, title="rolling")
    add_messages(rolling, 56, user=member_a, created_at=now - timedelta(days=1))
    old = make_conversation(tenant_a, member_a, title="old")
    add_messages(old, 300, user=member_a, created_at=now - timedelta(days=45))
    make_conversation(tenant_a, member_a, title="continues", continues=old)
    legacy = make_conversation(tenant_a, member_a, title="legacy")
    add_messages(legacy, 60, user=member_a, counted=False, created_at=now - timedelta(days=2))
    theirs = make_conversation(tenant_b, member_b, title="theirs")
    add_messages(theirs, 40, user=member_b, counted=False, created_at=now - timedelta(hours=3))
    return {"rolling": rolling, "old": old, "legacy": legacy, "theirs": theirs}


@pytest.mark.parametrize(
    ("task", "args"),
    [
        (tasks.refresh_rolling_summary, ("tenant_a", "rolling")),
        (tasks.summarize_for_continuation, ("tenant_a", "old")),
        (tasks.refresh_periodic_summary, ("tenant_a", "rolling")),
        (token_tasks.backfill_token_counts, ()),
        (tasks.refresh_periodic_summaries, ()),
    ],
    ids=lambda v: getattr(v, "name", str(v)).rsplit(".", 1)[-1],
)
def test_every_task_changes_nothing_the_second_time(
    world, tenant_a, task, args, eager_celery, settings
):
    ids = {"tenant_a": tenant_a.pk, **{k: v.pk for k, v in world.items()}}
    call_args = [ids[a] for a in args]
    before = db_snapshot()
    first = task.apply(args=call_args).get()
    assert first["status"] not in ("not_found", "duplicate", "locked")
    after_first = db_snapshot()
    assert after_first != before  # the first run did its work
    # A fresh lock namespace: the second run is not stopped by a lock or a dedupe claim,
    # it really runs and finds nothing to do.
    settings.SUMMARIES_LOCK_PREFIX += ":second"
    task.apply(args=call_args).get()
    assert db_snapshot() == after_first


def test_the_first_runs_did_their_work(world, tenant_a, tenant_b, eager_celery):
    tasks.refresh_rolling_summary.apply(args=(tenant_a.pk, world["rolling"].pk)).get()
    assert len(current_rolling(world["rolling"])) == 3
    tasks.summarize_for_continuation.apply(args=(tenant_a.pk, world["old"].pk)).get()
    (carried,) = current_rolling(world["old"])
    assert (carried.first_seq, carried.last_seq) == (1, 300)
    result = tasks.refresh_periodic_summaries.apply().get()
    assert result["status"] == "done" and result["periodic"] >= 3
    assert summaries_of(world["rolling"], kind="recent")
    assert summaries_of(world["theirs"], kind="long")
    assert summaries_of(world["old"], kind="recent") == []  # 45 days quiet
    result = token_tasks.backfill_token_counts.apply().get()
    assert result["updated"] == 100 and result["tenants"] >= 2


@pytest.mark.parametrize(
    "task",
    [
        tasks.refresh_rolling_summary,
        tasks.summarize_for_continuation,
        tasks.refresh_periodic_summary,
    ],
    ids=lambda t: t.name.rsplit(".", 1)[-1],
)
def test_tenant_a_id_with_tenant_b_conversation_finds_nothing(world, tenant_a, task, eager_celery):
    before = db_snapshot()
    result = task.apply(args=(tenant_a.pk, world["theirs"].pk)).get()
    assert result["status"] == "not_found"
    assert db_snapshot() == before


def test_backfill_of_one_tenant_leaves_the_other_alone(world, tenant_a, tenant_b, eager_celery):
    result = token_tasks.backfill_token_counts.apply(kwargs={"tenant_id": tenant_a.pk}).get()
    assert result["updated"] == 60
    theirs = world["theirs"]
    theirs.refresh_from_db()
    assert theirs.history_tokens == 0


def test_a_second_beat_run_in_the_same_window_is_a_no_op(world, eager_celery):
    assert tasks.refresh_periodic_summaries.apply().get()["status"] == "done"
    assert tasks.refresh_periodic_summaries.apply().get() == {"status": "duplicate"}
    assert token_tasks.backfill_token_counts.apply().get()["status"] == "done"
    assert token_tasks.backfill_token_counts.apply().get() == {"status": "duplicate"}
    # An explicit tenant run (the command, an admin action) is not deduplicated.
    assert (
        token_tasks.backfill_token_counts.apply(kwargs={"tenant_id": 1}).get()["status"] == "done"
    )


def test_fanout_continues_in_a_new_task_when_out_of_time(world, eager_celery, monkeypatch):
    monkeypatch.setattr(tasks, "FANOUT_WORK_SECONDS", -1)
    sent: list[dict] = []
    real = tasks.refresh_periodic_summaries.apply_async

    def record(*args, **kwargs):
        sent.append(kwargs.get("kwargs") or {})
        return real(*args, **kwargs)

    monkeypatch.setattr(tasks.refresh_periodic_summaries, "apply_async", record)
    result = tasks.refresh_periodic_summaries.apply(kwargs={"batch_size": 2}).get()
    assert result["status"] == "continued"
    assert sent and sent[0]["after_id"] > 0 and sent[0]["batch_size"] == 2


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda t: t.name.rsplit(".", 1)[-1])
def test_retry_and_time_limit_configuration(task):
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 3600)
    assert OperationalError in task.autoretry_for
    if task in SUMMARY_TASKS:  # the token jobs never call the summarizer
        assert SummaryUnavailable in task.autoretry_for
    assert Exception not in task.autoretry_for and ValueError not in task.autoretry_for
    assert task.retry_backoff and task.retry_jitter
    assert 0 < task.max_retries <= 10
    assert task.soft_time_limit < task.time_limit
    assert task.retry_backoff_max + task.time_limit < 3600
    if "visibility_timeout" in settings.CELERY_BROKER_TRANSPORT_OPTIONS:
        assert task.retry_backoff_max + task.time_limit < visibility
    assert task.acks_late


def test_transient_errors_are_retried_and_others_are_not(
    world, tenant_a, monkeypatch, eager_celery
):
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("could not connect to server")
        from summaries.services import Result

        return Result(status="created")

    monkeypatch.setattr(tasks, "summary_refresh", flaky)
    result = tasks.refresh_rolling_summary.apply(
        args=(tenant_a.pk, world["rolling"].pk), throw=False
    )
    assert result.successful() and len(calls) == 2

    def broken(*args, **kwargs):
        calls.append(1)
        raise ValueError("a bug, not a transient failure")

    calls.clear()
    monkeypatch.setattr(tasks, "summary_refresh", broken)
    result = tasks.refresh_rolling_summary.apply(
        args=(tenant_a.pk, world["rolling"].pk), throw=False
    )
    assert result.failed() and len(calls) == 1


def test_schedules_live_in_the_database():
    periodic = PeriodicTask.objects.get(name="summaries: refresh periodic summaries")
    assert periodic.task == "summaries.tasks.refresh_periodic_summaries"
    assert (periodic.interval.every, periodic.interval.period) == (1, "hours")
    assert periodic.enabled
    backfill = PeriodicTask.objects.get(name="summaries: backfill token counts")
    assert backfill.task == "summaries.tasks.backfill_token_counts"
    assert (backfill.interval.every, backfill.interval.period) == (5, "minutes")
    for entry in (periodic, backfill):
        assert entry.task in celery_app.tasks


def test_only_one_beat_ticks(monkeypatch):
    from django_celery_beat.schedulers import DatabaseScheduler

    from summaries.beat import LockedDatabaseScheduler

    ticks: list[object] = []

    def fake_tick(self, *args, **kwargs):
        ticks.append(self)
        return 1.0

    monkeypatch.setattr(DatabaseScheduler, "tick", fake_tick)
    first = LockedDatabaseScheduler(app=celery_app, lazy=True)
    second = LockedDatabaseScheduler(app=celery_app, lazy=True)
    for _ in range(3):
        first.tick()
        second.tick()
    assert ticks == [first, first, first]
    assert first.is_leader and not second.is_leader
    assert second.tick() <= second.lock_ttl  # waits, sends nothing
    first.close()
    second.tick()
    assert ticks[-1] is second and second.is_leader
    second.close()
