"""Recovering the replies of a runner that died (its process was killed mid-reply).

A live runner keeps its conversation's runner lock alive (:func:`keep_alive`), so a reply
still ``streaming`` in a conversation whose lock is free has no runner: :func:`sweep`
finishes it ``incomplete`` with the error code ``interrupted``, keeping the text streamed so
far (the delta log, or what was stored if that is longer), tells the conversation's sockets,
schedules what a finished reply schedules (a due rolling summary: a streaming reply holds
summaries back), and hands the conversation to a new runner, which answers the user messages
still waiting. A user message stored by a process that died before its reply started is found
the same way: the conversation's last message is a user message and no runner holds its lock.
Sending an interrupted reply's message again (same ``client_id``) regenerates the reply
(:func:`interrupted_reply_reopen`).

Who sweeps: beat (``chats.tasks.mark_stale_replies``, every minute) when the coordination is
shared (Redis); with the in-process coordination (the embedded default: one ASGI process) the
ASGI process itself (:func:`sweeper_start`), since only it sees its runners' locks. A reply
not written to for ``STALE_REPLY_SECONDS`` is finished whatever the locks say: the backstop
for a runner that hangs, and the only rule where the locks cannot be seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from chatplatform.counting import storage_counter_for
from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Message, MessageRole, Status
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.replies import turns
from chats.replies.coordination import (
    Coordination,
    RedisCoordination,
    coordination,
    runner_lock_name,
)
from chats.replies.db import db
from chats.replies.events import broadcast
from chats.replies.runner import replies_run, runner_start
from chats.services.messages import message_finish

logger = logging.getLogger(__name__)

#: The error code of a reply whose runner died; a send of its message again regenerates it.
INTERRUPTED = "interrupted"
INTERRUPTED_MESSAGE = (
    "The reply was interrupted; the text so far is kept. Send the message again to regenerate it."
)
#: A reply still ``streaming`` this long after its last write is finished whatever the locks say.
STALE_REPLY_SECONDS = 300
#: A user message left without a reply is answered by the sweep if the conversation was last
#: written to within this window (older ones wait for the client to send them again) ...
UNANSWERED_WINDOW_SECONDS = 15 * 60
#: ... and at least this long ago (the process that stored it starts its runner itself).
UNANSWERED_GRACE_SECONDS = 5
#: Replies (and conversations) looked at per sweep; the rest wait for the next one.
SWEEP_BATCH = 200
#: How often the ASGI process sweeps when the coordination is in-process (seconds).
SWEEP_INTERVAL_SECONDS = 15.0


@dataclass(frozen=True)
class StreamingReply:
    tenant_id: int
    conversation_id: int
    reply_id: int
    #: Not written to for ``STALE_REPLY_SECONDS``.
    stale: bool


@dataclass
class Swept:
    """What a sweep did: the replies it finished as interrupted, and the conversations
    (tenant id, conversation id) it left to a new runner (their locks are free)."""

    interrupted: list[int] = field(default_factory=list)
    handed_off: list[tuple[int, int]] = field(default_factory=list)


def streaming_replies(now: datetime | None = None) -> list[StreamingReply]:
    """Replies being streamed, least recently written first (the partial streaming index).
    Deliberately cross-tenant: the sweep only finishes rows whose runner is gone."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=STALE_REPLY_SECONDS)
    with all_tenants():
        rows = list(
            Message.objects.filter(status=Status.STREAMING)
            .order_by("updated_at")
            .values_list("tenant_id", "conversation_id", "pk", "updated_at")[:SWEEP_BATCH]
        )
    return [StreamingReply(t, c, pk, updated < cutoff) for t, c, pk, updated in rows]


def unanswered_conversations(now: datetime | None = None) -> list[tuple[int, int]]:
    """Conversations written to within the unanswered window whose last message is a user
    message (its reply never started), as (tenant id, conversation id). One query, on the
    conversations' (tenant, updated_at) index."""
    now = now or timezone.now()
    with all_tenants():
        tenant_ids = list(Tenant.objects.values_list("pk", flat=True))
        last_role = Message.objects.filter(
            tenant_id=OuterRef("tenant_id"),
            conversation_id=OuterRef("pk"),
            seq=OuterRef("last_seq"),
        ).values("role")[:1]
        rows = (
            Conversation.objects.filter(
                tenant_id__in=tenant_ids,
                updated_at__gte=now - timedelta(seconds=UNANSWERED_WINDOW_SECONDS),
                updated_at__lt=now - timedelta(seconds=UNANSWERED_GRACE_SECONDS),
            )
            .annotate(last_role=Subquery(last_role))
            .filter(last_role__in=(MessageRole.USER, MessageRole.TOOL))
            .values_list("tenant_id", "pk")[:SWEEP_BATCH]
        )
        return [(tenant_id, pk) for tenant_id, pk in rows]


def reply_interrupt(tenant_id: int, reply_id: int, streamed: str) -> str | None:
    """Finish the streaming reply ``reply_id`` as interrupted, with ``streamed`` (the text its
    runner sent) when that extends the stored text, else the stored text; counted as any
    finished reply. Returns the text kept; None (nothing changed) when it is no longer
    streaming."""
    with tenant_scope(tenant_id), transaction.atomic():
        reply = (
            Message.objects.select_for_update()
            .select_related("conversation")
            .filter(pk=reply_id, status=Status.STREAMING)
            .first()
        )
        if reply is None:
            return None
        longer = len(streamed) > len(reply.content) and streamed.startswith(reply.content)
        kept = streamed if longer else reply.content
        message_finish(
            message=reply,
            content=kept,
            status=Status.INCOMPLETE,
            error_code=INTERRUPTED,
            error_message=INTERRUPTED_MESSAGE,
        )
        conversation = reply.conversation
        transaction.on_commit(lambda: turns.after_reply(conversation))
    return kept


def interrupted_reply_reopen(message: Message) -> bool:
    """``message`` was sent again (same client id): if its reply was interrupted, mark it
    failed, so the runner regenerates it as it does a failed reply, and take its tokens out
    of the conversation's total (the new reply counts its own). False when its reply is
    anything else: complete, stopped, still streaming, or none."""
    with tenant_scope(message.tenant_id), transaction.atomic():
        reply = (
            Message.objects.select_for_update()
            .filter(answers=message, status=Status.INCOMPLETE, error_code=INTERRUPTED)
            .first()
        )
        if reply is None:
            return False
        Message.objects.filter(pk=reply.pk).update(
            status=Status.FAILED, token_count=None, token_counter=""
        )
        if reply.token_count is not None:
            conversation = Conversation.objects.get(pk=reply.conversation_id)
            counter = storage_counter_for(policy_for(conversation).model_profile)
            Conversation.objects.filter(pk=conversation.pk).update(
                history_tokens=F("history_tokens") - (reply.token_count + counter.message_overhead)
            )
    return True


def _streamed_text(logged: list[tuple[int, str]]) -> tuple[str, int]:
    """The text of a delta log's unbroken run from seq 1 and its last seq (a failed send
    leaves a gap, after which the log no longer spells the reply)."""
    parts = []
    for expected, (seq, text) in enumerate(sorted(logged), start=1):
        if seq != expected:
            break
        parts.append(text)
    return "".join(parts), len(parts)


def interrupted_event(reply_id: int, partial: bool, last_seq: int) -> dict[str, Any]:
    """The closing event of an interrupted reply, as the runner's own closing events."""
    return {
        "type": "error",
        "code": INTERRUPTED,
        "message": INTERRUPTED_MESSAGE,
        "message_id": reply_id,
        "status": Status.INCOMPLETE,
        "partial": partial,
        "last_seq": last_seq,
        "retryable": True,
    }


async def _interrupt(hub: Coordination, reply: StreamingReply) -> bool:
    try:
        logged = await hub.deltas_since(reply.tenant_id, reply.reply_id, 0) or []
    except Exception:  # the log is unreachable: the stored text is what is kept
        logger.warning("delta log of reply %s unreadable", reply.reply_id, exc_info=True)
        logged = []
    streamed, last_seq = _streamed_text(logged)
    kept = await db(reply_interrupt)(reply.tenant_id, reply.reply_id, streamed)
    if kept is None:
        return False
    event = interrupted_event(reply.reply_id, bool(kept), last_seq)
    try:
        await broadcast(reply.tenant_id, reply.conversation_id, event)
    except Exception:  # the sockets resync from the stored reply
        logger.warning("could not tell conversation %s", reply.conversation_id, exc_info=True)
    return True


async def _lock_is_free(hub: Coordination, tenant_id: int, conversation_id: int) -> str | None:
    """The runner lock's token if it was free (the caller lets go of it), else None."""
    return await hub.acquire(runner_lock_name(tenant_id, conversation_id))


async def sweep(hub: Coordination | None = None, *, locks_visible: bool = True) -> Swept:
    """Finish the replies whose runner is gone (see the module) and find the conversations
    that need a new runner; returns what it did. ``locks_visible``: whether ``hub`` holds the
    runners' locks (shared Redis, or the runners' own process); without it only replies not
    written to for ``STALE_REPLY_SECONDS`` are finished, and no conversation is handed off.
    Idempotent: a second sweep finds nothing to finish."""
    hub = hub or coordination()
    swept = Swept()
    by_conversation: dict[tuple[int, int], list[StreamingReply]] = {}
    for reply in await db(streaming_replies)():
        by_conversation.setdefault((reply.tenant_id, reply.conversation_id), []).append(reply)
    for key, replies in by_conversation.items():
        # Holding the free lock keeps a new runner out while the dead one's replies finish.
        token = await _lock_is_free(hub, *key) if locks_visible else None
        try:
            for reply in replies:
                if (token is not None or reply.stale) and await _interrupt(hub, reply):
                    swept.interrupted.append(reply.reply_id)
        finally:
            if token is not None:
                await hub.release(runner_lock_name(*key), token)
        if token is not None:
            swept.handed_off.append(key)
    if locks_visible:
        for key in await db(unanswered_conversations)():
            if key in by_conversation:
                continue
            token = await _lock_is_free(hub, *key)
            if token is not None:
                await hub.release(runner_lock_name(*key), token)
                swept.handed_off.append(key)
    return swept


async def sweep_once(*, locks_visible: bool) -> Swept:
    """:func:`sweep` from a task's own event loop, whose connections are closed after."""
    hub = coordination()
    try:
        return await sweep(hub, locks_visible=locks_visible)
    finally:
        await hub.aclose()


#: Waiting messages a background job answers per run: each reply can take the model's whole
#: timeout, so a job that answered a long queue in series would outlive its time limit; it
#: answers this many and hands the rest to a run of its own.
REPLIES_PER_RUN = 1


async def answer_once(
    tenant_id: int, conversation_id: int, attempted: set[int] | None = None
) -> bool:
    """Answer the conversation's oldest waiting message (at most ``REPLIES_PER_RUN``) from a
    task's own event loop, skipping the ``attempted`` ones (updated with those it tries).
    Returns whether more are left waiting for another run. Nothing happens while another
    runner holds the conversation: that one answers them."""
    hub = coordination()
    try:
        return await replies_run(
            tenant_id, conversation_id, max_turns=REPLIES_PER_RUN, attempted=attempted
        )
    finally:
        await hub.aclose()


def shared_locks() -> bool:
    """Whether every process sees the runners' locks (the coordination is on Redis)."""
    return isinstance(coordination(), RedisCoordination)


_sweeper: asyncio.Task[None] | None = None


def sweeper_start(interval: float = SWEEP_INTERVAL_SECONDS) -> asyncio.Task[None] | None:
    """In the ASGI process, when the coordination is in-process: sweep now (the replies a
    previous process left streaming) and every ``interval`` seconds, starting a runner for
    each conversation handed off. None (beat sweeps) when the locks are shared."""
    global _sweeper
    if shared_locks():
        return None
    loop = asyncio.get_running_loop()
    if _sweeper is None or _sweeper.done() or _sweeper.get_loop() is not loop:
        _sweeper = loop.create_task(_sweep_forever(interval))
    return _sweeper


async def sweeper_stop() -> None:
    """Stop the sweep :func:`sweeper_start` started (the ASGI process shuts down)."""
    global _sweeper
    task, _sweeper = _sweeper, None
    if task is not None and task.get_loop() is asyncio.get_running_loop():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _sweep_forever(interval: float) -> None:
    while True:
        try:
            swept = await sweep(locks_visible=True)
            for tenant_id, conversation_id in swept.handed_off:
                runner_start(tenant_id, conversation_id)
        except Exception:
            logger.exception("the reply recovery sweep failed")
        await asyncio.sleep(interval)
