"""The token-count jobs: thin adapters over :mod:`chats.token_counts.backfill`.

They keep the names they were first registered under (``summaries.tasks.*``): the beat
schedule in the database and messages already queued refer to them. ``chats.tasks`` imports
this module so Celery's autodiscovery registers them. Like every job they take ids, are
idempotent, retry only transient errors and have soft and hard time limits
(``docs/jobs.md``).
"""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task
from django.conf import settings

from chatplatform.jobs import same_queue, task_options
from chatplatform.locks import claim_run, exclusive
from chats.token_counts import backfill as backfill_core

BACKFILL_SOFT_LIMIT, BACKFILL_HARD_LIMIT = 240, 270
BACKFILL_WORK_SECONDS = 180
RECOUNT_SOFT_LIMIT, RECOUNT_HARD_LIMIT = 60, 90
#: A second beat started by mistake does not double the sweep; scheduled every 5 minutes.
BACKFILL_DEDUPE_SECONDS = 2 * 60

COMMON = task_options()


def backfill_dedupe_seconds() -> int:
    """The sweep's dedupe window; operators tune it with the beat jobs' shared setting."""
    configured = getattr(settings, "SUMMARIES_BEAT_DEDUPE_SECONDS", {}) or {}
    return int(configured.get("backfill_token_counts", BACKFILL_DEDUPE_SECONDS))


@shared_task(
    name="summaries.tasks.backfill_token_counts",
    soft_time_limit=BACKFILL_SOFT_LIMIT,
    time_limit=BACKFILL_HARD_LIMIT,
    bind=True,
    **COMMON,
)
def backfill_token_counts(
    self: Any,
    tenant_id: int | None = None,
    from_tenant_id: int = 0,
    batch_size: int = backfill_core.DEFAULT_BATCH_SIZE,
    continuation: bool = False,
) -> dict[str, Any]:
    """Beat: give legacy messages their token counts and recount those counted by another
    counter than their policy's model uses (every tenant, or one). Resumable: a run that
    reaches its time budget continues in a new task from the tenant it stopped in."""
    name = "backfill_token_counts"
    if not continuation and tenant_id is None and not claim_run(name, backfill_dedupe_seconds()):
        return {"status": "duplicate"}
    scope = "all" if tenant_id is None else f"t{tenant_id}"
    with exclusive(f"backfill:{scope}", settings.JOB_LOCK_SECONDS) as acquired:
        if not acquired:
            return {"status": "locked"}
        stats, resume_from = backfill_core.backfill_token_counts(
            tenant_id=tenant_id,
            from_tenant_id=from_tenant_id,
            batch_size=batch_size,
            deadline=time.monotonic() + BACKFILL_WORK_SECONDS,
            # Background work stays gentle by default; a large legacy import can raise it.
            workers=int(getattr(settings, "SUMMARIES_BACKFILL_WORKERS", 0)),
        )
    if resume_from is not None:
        backfill_token_counts.apply_async(
            kwargs={
                "tenant_id": tenant_id,
                "from_tenant_id": resume_from,
                "batch_size": batch_size,
                "continuation": True,
            },
            countdown=1,
            **same_queue(self),
        )
    return {"status": "continued" if resume_from is not None else "done", **stats.as_dict()}


@shared_task(
    name="summaries.tasks.recount_message_tokens",
    soft_time_limit=RECOUNT_SOFT_LIMIT,
    time_limit=RECOUNT_HARD_LIMIT,
    **COMMON,
)
def recount_message_tokens(
    tenant_id: int, conversation_id: int, message_ids: list[int]
) -> dict[str, Any]:
    """Count the messages an assembly had to estimate on the fly (no count, or another
    counter's), queued by ``chats.token_counts.recount`` at most once per conversation per
    few minutes. Idempotent: a second run updates nothing."""
    stats = backfill_core.backfill_messages(tenant_id, conversation_id, message_ids)
    return {"status": "done", **stats.as_dict()}
