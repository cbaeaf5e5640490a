"""Background jobs of the chats app (thin adapters over the services)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from celery import shared_task

from chats.replies import recovery
from summaries.tasks import COMMON

#: The sweep runs every minute: it is done well before the next one.
SWEEP_SOFT_LIMIT, SWEEP_HARD_LIMIT = 45, 55

EMBED_SOFT_LIMIT, EMBED_HARD_LIMIT = 120, 150
EMBED_BACKFILL_SOFT_LIMIT, EMBED_BACKFILL_HARD_LIMIT = 120, 150
#: The sweep starts no new batch after this many seconds; the rest goes to a follow-up run.
EMBED_BACKFILL_WORK_SECONDS = 60
#: Beat schedules the sweep every 10 minutes; a second beat's run within this is a no-op.
EMBED_BACKFILL_DEDUPE_SECONDS = 5 * 60


@shared_task(
    name="chats.tasks.mark_stale_replies",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=SWEEP_SOFT_LIMIT,
    time_limit=SWEEP_HARD_LIMIT,
)
def mark_stale_replies() -> int:
    """Beat, every minute: replies whose runner died become ``incomplete`` with the text
    streamed so far, and the conversations they (or a message stored without a reply) left
    get a new runner (``chats.replies.recovery``); returns how many replies it finished.
    A runner's death is seen by its lock when the locks are on Redis; otherwise (this worker
    cannot see the web process's locks) only a reply not written to for five minutes is
    finished. Idempotent: a second run finds nothing to change. Cross-tenant by design: it
    only finishes rows whose runner is gone; each runner works inside its own tenant."""
    shared = recovery.shared_locks()
    swept = asyncio.run(recovery.sweep_once(locks_visible=shared))
    for tenant_id, conversation_id in swept.handed_off:
        answer_waiting_messages.delay(tenant_id, conversation_id)
    return len(swept.interrupted)


@shared_task(name="chats.tasks.answer_waiting_messages", acks_late=True, ignore_result=True)
def answer_waiting_messages(tenant_id: int, conversation_id: int) -> None:
    """Run the conversation's reply runner here: it answers the user messages still waiting,
    oldest first, streaming to the conversation's sockets through the channel layer. Does
    nothing while another runner holds the conversation (that one looks again when done).
    Idempotent: a message is answered once (one reply per message, in the database)."""
    asyncio.run(recovery.answer_once(tenant_id, conversation_id))


def _same_queue(task: Any) -> dict[str, Any]:
    info = getattr(task.request, "delivery_info", None) or {}
    queue = info.get("routing_key")
    return {"queue": queue} if queue else {}


@shared_task(
    name="chats.tasks.embed_conversation_messages",
    soft_time_limit=EMBED_SOFT_LIMIT,
    time_limit=EMBED_HARD_LIMIT,
    bind=True,
    **COMMON,
)
def embed_conversation_messages(self: Any, tenant_id: int, conversation_id: int) -> dict[str, Any]:
    """Embed the conversation's newest messages that have no vector yet (dense retrieval;
    ``chats.retrieval.dense.embed_conversation``), a bounded batch per run; re-enqueue while
    more remain. Idempotent: vectors are inserted once per message and model; a conversation
    whose policy no longer asks for dense retrieval is left alone."""
    from chats.retrieval.dense import embed_conversation

    result = embed_conversation(tenant_id, conversation_id)
    if result.more:
        embed_conversation_messages.apply_async(
            (tenant_id, conversation_id), countdown=1, **_same_queue(self)
        )
    return result.as_dict()


@shared_task(
    name="chats.tasks.backfill_message_embeddings",
    soft_time_limit=EMBED_BACKFILL_SOFT_LIMIT,
    time_limit=EMBED_BACKFILL_HARD_LIMIT,
    bind=True,
    **COMMON,
)
def backfill_message_embeddings(
    self: Any, after_id: int = 0, batch_size: int | None = None
) -> dict[str, Any]:
    """Beat: sweep the conversations whose policy uses dense retrieval, by id in bounded
    batches, and queue ``embed_conversation_messages`` for those with messages left to
    embed. A run started by beat (``after_id == 0``) claims the dedupe window first; a sweep
    that runs out of time continues in a new task from where it stopped. Does nothing where
    the embeddings are not installed."""
    from chats.retrieval import dense, embeddings
    from summaries.locks import claim_run

    if not embeddings.available():
        return {"status": "unavailable"}
    name = "backfill_message_embeddings"
    if after_id == 0 and not claim_run(name, EMBED_BACKFILL_DEDUPE_SECONDS):
        return {"status": "duplicate"}
    size = batch_size or dense.BACKFILL_BATCH
    deadline = time.monotonic() + EMBED_BACKFILL_WORK_SECONDS
    cursor, scanned, queued, status = after_id, 0, 0, "done"
    while True:
        batch = dense.backfill_batch(after_id=cursor, batch_size=size)
        scanned += batch.scanned
        for tenant_id, conversation_id in batch.due:
            embed_conversation_messages.apply_async(
                (tenant_id, conversation_id), **_same_queue(self)
            )
            queued += 1
        if batch.next_after_id is None:
            break
        cursor = batch.next_after_id
        if time.monotonic() > deadline:
            backfill_message_embeddings.apply_async(
                kwargs={"after_id": cursor, "batch_size": size}, countdown=1, **_same_queue(self)
            )
            status = "continued"
            break
    return {"status": status, "scanned": scanned, "queued": queued, "after_id": cursor}
