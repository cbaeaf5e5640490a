"""Celery tasks of the summaries app: thin adapters over the services.

Every task takes ids, is idempotent (a second run changes nothing), retries only transient
errors (database connection/lock failures, an unavailable provider, the broker or cache
being unreachable) with capped exponential backoff, and has soft and hard time limits.
The services bound their own work below the soft limit and ask for another run when more
remains, which the task enqueues. The beat tasks claim their run for a dedupe window, so a
second beat started by mistake does not double the work.

The time limits, the retry backoff and the locks come from settings, where they are derived
from each other (``docs/jobs.md``): hard time limit < lock < the Redis broker's visibility
timeout, and retry backoff plus hard time limit below the visibility timeout, so a task
waiting for its retry is never handed to a second worker, and a task whose worker died runs
again, once, within minutes.
"""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from chatplatform.jobs import same_queue, task_options
from chatplatform.locks import claim_run
from summaries.services import (
    continuation_summary_ensure,
    periodic_due_batch,
    periodic_summary_refresh,
    summary_refresh,
)
from summaries.summarizer import SummaryUnavailable

SUMMARY_SOFT_LIMIT = settings.CELERY_TASK_SOFT_TIME_LIMIT
SUMMARY_HARD_LIMIT = settings.CELERY_TASK_TIME_LIMIT
SUMMARY_WORK_SECONDS = settings.JOB_WORK_SECONDS  # no new chunk after this; the rest: next run
FANOUT_SOFT_LIMIT, FANOUT_HARD_LIMIT = 120, 150
FANOUT_WORK_SECONDS = 60
FANOUT_BATCH = 500

DEFAULT_DEDUPE_SECONDS = {
    "refresh_periodic_summaries": 20 * 60,  # scheduled hourly
}

COMMON = task_options(SummaryUnavailable)


def dedupe_seconds(task: str) -> int:
    configured = getattr(settings, "SUMMARIES_BEAT_DEDUPE_SECONDS", {}) or {}
    return int(configured.get(task, DEFAULT_DEDUPE_SECONDS[task]))


def _deadline(seconds: float) -> float:
    return time.monotonic() + seconds


@shared_task(
    name="summaries.tasks.refresh_rolling_summary",
    soft_time_limit=SUMMARY_SOFT_LIMIT,
    time_limit=SUMMARY_HARD_LIMIT,
    bind=True,
    **COMMON,
)
def refresh_rolling_summary(self: Any, tenant_id: int, conversation_id: int) -> dict[str, Any]:
    """Build the conversation's due rolling summaries (and merges); re-enqueue if more."""
    result = summary_refresh(tenant_id, conversation_id, deadline=_deadline(SUMMARY_WORK_SECONDS))
    if result.more:
        refresh_rolling_summary.apply_async(
            (tenant_id, conversation_id), countdown=1, **same_queue(self)
        )
    return result.as_dict()


@shared_task(
    name="summaries.tasks.summarize_for_continuation",
    soft_time_limit=SUMMARY_SOFT_LIMIT,
    time_limit=SUMMARY_HARD_LIMIT,
    bind=True,
    **COMMON,
)
def summarize_for_continuation(self: Any, tenant_id: int, conversation_id: int) -> dict[str, Any]:
    """Summarise the whole history of a conversation being continued (bounded per run)."""
    result = continuation_summary_ensure(
        tenant_id, conversation_id, deadline=_deadline(SUMMARY_WORK_SECONDS)
    )
    if result.more:
        countdown = 30 if result.status == "locked" else 1
        summarize_for_continuation.apply_async(
            (tenant_id, conversation_id), countdown=countdown, **same_queue(self)
        )
    return result.as_dict()


@shared_task(
    name="summaries.tasks.refresh_periodic_summary",
    soft_time_limit=SUMMARY_SOFT_LIMIT,
    time_limit=SUMMARY_HARD_LIMIT,
    **COMMON,
)
def refresh_periodic_summary(
    tenant_id: int, conversation_id: int, kinds: list[str] | None = None
) -> dict[str, Any]:
    """Refresh one conversation's 7-day / 30-day summaries that are due."""
    if kinds:
        result = periodic_summary_refresh(tenant_id, conversation_id, kinds=kinds)
    else:
        result = periodic_summary_refresh(tenant_id, conversation_id)
    return result.as_dict()


@shared_task(
    name="summaries.tasks.refresh_periodic_summaries",
    soft_time_limit=FANOUT_SOFT_LIMIT,
    time_limit=FANOUT_HARD_LIMIT,
    bind=True,
    **COMMON,
)
def refresh_periodic_summaries(
    self: Any, after_id: int = 0, batch_size: int = FANOUT_BATCH
) -> dict[str, Any]:
    """Beat: sweep conversations by id in bounded batches and dispatch, per conversation,
    the periodic summaries that are due and the carry-over summaries that are missing.

    A run started by beat (``after_id == 0``) claims the dedupe window first; a sweep that
    runs out of time continues in a new task from where it stopped.
    """
    name = "refresh_periodic_summaries"
    if after_id == 0 and not claim_run(name, dedupe_seconds(name)):
        return {"status": "duplicate"}
    deadline = _deadline(FANOUT_WORK_SECONDS)
    now = timezone.now()
    cursor, periodic, continuations, scanned = after_id, 0, 0, 0
    status = "done"
    while True:
        batch = periodic_due_batch(after_id=cursor, batch_size=batch_size, now=now)
        scanned += batch.scanned
        for tenant_id, conversation_id, kinds in batch.periodic:
            refresh_periodic_summary.apply_async(
                (tenant_id, conversation_id, list(kinds)), **same_queue(self)
            )
            periodic += 1
        for tenant_id, conversation_id in batch.continuations:
            summarize_for_continuation.apply_async((tenant_id, conversation_id), **same_queue(self))
            continuations += 1
        if batch.next_after_id is None:
            break
        cursor = batch.next_after_id
        if time.monotonic() > deadline:
            refresh_periodic_summaries.apply_async(
                kwargs={"after_id": cursor, "batch_size": batch_size},
                countdown=1,
                **same_queue(self),
            )
            status = "continued"
            break
    return {
        "status": status,
        "scanned": scanned,
        "periodic": periodic,
        "continuations": continuations,
        "after_id": cursor,
    }
