"""Background jobs of the chats app (thin adapters over the services): the sweep of replies
whose runner died, the answering of messages left waiting, the tenants' retention, and
(registered here, defined beside what they serve) the embedding jobs of retrieval and the
token-count jobs."""

from __future__ import annotations

import asyncio

from celery import shared_task

from chatplatform.models import Tenant
from chats.replies import recovery
from chats.retrieval.tasks import backfill_message_embeddings, embed_conversation_messages
from chats.services.retention import conversations_expire
from chats.token_counts.tasks import backfill_token_counts, recount_message_tokens
from chats.transfer.followup import process_imported_conversations
from chats.transfer.tasks import remove_expired_exports, run_transfer

#: The sweep runs every minute: it is done well before the next one.
SWEEP_SOFT_LIMIT, SWEEP_HARD_LIMIT = 45, 55


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
def answer_waiting_messages(
    tenant_id: int, conversation_id: int, attempted: list[int] | None = None
) -> None:
    """Answer the conversation's oldest waiting user message here, streaming to its sockets
    through the channel layer, then hand the messages still waiting to a new run of this task
    (after letting go of the conversation): one reply per run, so each reply has the task's
    whole time limit and a long queue never runs into it. ``attempted``: the messages the
    runs before already tried (a reply that failed is not retried by the same chain).
    Does nothing while another runner holds the conversation (that one looks again when
    done). Idempotent: a message is answered once (one reply per message, in the database;
    a reply being streamed is not started again)."""
    tried = set(attempted or ())
    if asyncio.run(recovery.answer_once(tenant_id, conversation_id, tried)):
        answer_waiting_messages.delay(tenant_id, conversation_id, sorted(tried))


__all__ = [
    "answer_waiting_messages",
    "backfill_message_embeddings",
    "backfill_token_counts",
    "embed_conversation_messages",
    "mark_stale_replies",
    "process_imported_conversations",
    "recount_message_tokens",
    "remove_expired_exports",
    "run_transfer",
]


@shared_task(name="chats.tasks.expire_conversations", acks_late=True, ignore_result=True)
def expire_conversations() -> int:
    """Beat, daily: every tenant with a retention period loses the conversations nobody has
    written in for that long (:func:`chats.services.retention.conversations_expire`); returns
    how many. Idempotent. Cross-tenant by design: each tenant's are deleted in its own scope."""
    return sum(
        conversations_expire(tenant)
        for tenant in Tenant.objects.filter(retention_days__isnull=False).order_by("pk")
    )
