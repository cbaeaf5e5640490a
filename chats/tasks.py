"""Background jobs of the chats app (thin adapters over the reply services)."""

from __future__ import annotations

from celery import shared_task

from chats.replies.turns import mark_stale_streaming

#: A reply still ``streaming`` this long after its last write lost its process.
STALE_REPLY_SECONDS = 300


@shared_task(name="chats.tasks.mark_stale_replies", acks_late=True, ignore_result=True)
def mark_stale_replies() -> int:
    """Replies left ``streaming`` by a process that died become ``incomplete`` with the text
    stored so far (beat, every minute). Idempotent: a second run finds nothing to change.
    Works across tenants by design: it only finishes rows whose own process is gone."""
    return mark_stale_streaming(older_than_seconds=STALE_REPLY_SECONDS)
