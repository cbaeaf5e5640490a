"""The jobs of retrieval by meaning: embedding a conversation's new messages after a reply,
and the beat sweep that catches up on whatever was missed. Registered with the chats app's
tasks (``chats.tasks``) under their historical names, which beat schedules refer to."""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import shared_task
from django.db import transaction

from chatplatform.jobs import same_queue, task_options
from chatplatform.locks import claim_run
from chatplatform.models.conversations import Conversation
from chatplatform.policies import policy_for
from chats.retrieval import dense, embeddings

logger = logging.getLogger(__name__)

EMBED_SOFT_LIMIT, EMBED_HARD_LIMIT = 120, 150
EMBED_BACKFILL_SOFT_LIMIT, EMBED_BACKFILL_HARD_LIMIT = 120, 150
#: The sweep starts no new batch after this many seconds; the rest goes to a follow-up run.
EMBED_BACKFILL_WORK_SECONDS = 60
#: Beat schedules the sweep every 10 minutes; a second beat's run within this is a no-op.
EMBED_BACKFILL_DEDUPE_SECONDS = 5 * 60


def schedule_embedding(conversation: Conversation) -> bool:
    """Called after a reply (``chats.replies.turns.after_reply``): when the conversation's
    policy uses dense retrieval and the embeddings are installed here, queue
    ``embed_conversation_messages`` after commit, at most once per conversation per
    :data:`dense.SCHEDULE_WINDOW_SECONDS` (delayed by as much, so the window's turns go together;
    the beat backfill catches anything a claim skipped). Never raises; returns whether a
    task was queued."""
    try:
        if not dense.dense_enabled(policy_for(conversation)) or not embeddings.available():
            return False
        tenant_id, conversation_id = conversation.tenant_id, conversation.pk
        if not claim_run(
            dense.SCHEDULE_CLAIM, dense.SCHEDULE_WINDOW_SECONDS, f"t{tenant_id}:c{conversation_id}"
        ):
            return False

        def dispatch() -> None:
            try:
                embed_conversation_messages.apply_async(
                    (tenant_id, conversation_id), countdown=dense.SCHEDULE_WINDOW_SECONDS
                )
            except Exception:  # the beat backfill catches up
                logger.exception("could not queue embeddings for conversation %s", conversation_id)

        transaction.on_commit(dispatch)
        return True
    except Exception:  # the reply is stored and answered; the beat backfill catches up
        logger.exception("could not schedule embeddings for conversation %s", conversation.pk)
        return False


@shared_task(
    name="chats.tasks.embed_conversation_messages",
    soft_time_limit=EMBED_SOFT_LIMIT,
    time_limit=EMBED_HARD_LIMIT,
    bind=True,
    **task_options(),
)
def embed_conversation_messages(self: Any, tenant_id: int, conversation_id: int) -> dict[str, Any]:
    """Embed the conversation's messages that have no vector yet, newest first, then bring its
    nearest-neighbour index up to date (dense retrieval;
    ``chats.retrieval.dense.embed_conversation``), a bounded batch per run; re-enqueue while
    more remain (and later when another run holds the conversation). Idempotent: vectors are
    inserted once per message and model, the index adds only what it lacks; a conversation
    whose policy no longer asks for dense retrieval is left alone."""
    result = dense.embed_conversation(tenant_id, conversation_id)
    if result.more or result.status == "busy":
        embed_conversation_messages.apply_async(
            (tenant_id, conversation_id),
            countdown=1 if result.more else dense.SCHEDULE_WINDOW_SECONDS,
            **same_queue(self),
        )
    return result.as_dict()


@shared_task(
    name="chats.tasks.backfill_message_embeddings",
    soft_time_limit=EMBED_BACKFILL_SOFT_LIMIT,
    time_limit=EMBED_BACKFILL_HARD_LIMIT,
    bind=True,
    **task_options(),
)
def backfill_message_embeddings(
    self: Any, after_id: int = 0, batch_size: int | None = None
) -> dict[str, Any]:
    """Beat: sweep the conversations whose policy uses dense retrieval, by id in bounded
    batches, and queue ``embed_conversation_messages`` for those with messages left to
    embed. A run started by beat (``after_id == 0``) claims the dedupe window first; a sweep
    that runs out of time continues in a new task from where it stopped. Does nothing where
    the embeddings are not installed."""
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
                (tenant_id, conversation_id), **same_queue(self)
            )
            queued += 1
        if batch.next_after_id is None:
            break
        cursor = batch.next_after_id
        if time.monotonic() > deadline:
            backfill_message_embeddings.apply_async(
                kwargs={"after_id": cursor, "batch_size": size}, countdown=1, **same_queue(self)
            )
            status = "continued"
            break
    return {"status": status, "scanned": scanned, "queued": queued, "after_id": cursor}
