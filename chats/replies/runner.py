"""The async reply runner: one per conversation at a time, answering queued user messages in
order, streaming each reply to the conversation's group.

Not tied to a socket: the runner is a task of the ASGI process (or of the calling request),
so a closed tab neither loses nor cancels the reply. The runner keeps its lock alive while it
lives; a process that dies mid-stream leaves the reply ``streaming`` and the lock to expire,
and ``chats.replies.recovery`` finishes the reply ``incomplete`` with its text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings

from chatplatform.core.llm.base import (
    Compaction,
    ContextEdited,
    Done,
    Provider,
    TextDelta,
    ToolCall,
    Usage,
)
from chatplatform.core.llm.errors import PromptTooLong, ProviderError, StreamInterrupted
from chatplatform.core.llm.providers import OFFLINE, build_provider_or_offline, load_clients
from chatplatform.core.llm.tool_loop import stream_with_tools
from chatplatform.model_endpoints import provider_access
from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Status
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import turns
from chats.replies.calibration import calibration_record
from chats.replies.coordination import (
    Coordination,
    RedisCoordination,
    coordination,
    keep_alive,
    runner_lock_name,
)
from chats.replies.db import db
from chats.replies.deltas import DeltaSender
from chats.replies.events import Addressed, broadcast, direct_publishes_for, emit, group_send
from chats.replies.outcomes import (
    CUT_SHORT,
    cut_short,
    elapsed_ms,
    failed,
    internal_error_event,
    stopped,
)
from chats.replies.provider_context import ProviderManaged
from memory.tools import execute_tool

logger = logging.getLogger(__name__)

#: The reply is written to the database at most this often while it streams (seconds).
FLUSH_INTERVAL = 0.5
#: The smallest prompt budget a "prompt is too long" retry shrinks to (tokens).
MIN_RETRY_BUDGET = 512
#: How often the stop flag is checked while streaming (seconds).
STOP_CHECK_INTERVAL = 0.2

ProviderFactory = Callable[[turns.PreparedTurn], Provider]
_background: set[asyncio.Task[Any]] = set()

load_clients()  # every provider's client and SDK, before the first turn imports one


def default_provider(prepared: turns.PreparedTurn) -> Provider:
    """The provider of the turn's model; the offline one when no credentials are set.
    Raises :class:`EndpointRefused` for a tenant's endpoint the operator does not allow
    (checked at every call: a DNS answer can change since the profile was saved)."""
    access = provider_access(prepared.profile)
    # The offline provider bills the prompt from the conversation's simulated cache.
    simulated = prepared.simulated_cache.cache if prepared.simulated_cache is not None else None
    if access is None:
        return OFFLINE.build(prompt_cache=simulated)
    access.check()
    return build_provider_or_offline(
        access.provider,
        api_key=access.api_key,
        base_url=access.base_url,
        timeout=settings.LLM_TIMEOUT_SECONDS,
        prompt_cache=simulated,
    )


_provider_factory: ProviderFactory = default_provider


def provider_factory_set(factory: ProviderFactory | None) -> None:
    """Swap how providers are built (benchmarks use an instant provider)."""
    global _provider_factory
    _provider_factory = factory or default_provider


def runner_start(
    tenant_id: int,
    conversation_id: int,
    *,
    token: str | None = None,
    first: turns.NextTurn | None = None,
    lead: Sequence[Addressed] = (),
) -> asyncio.Task[Any]:
    """Run the conversation's replies in the background of the current event loop; the
    arguments are as for :func:`replies_run`."""
    task = asyncio.create_task(
        replies_run(tenant_id, conversation_id, token=token, first=first, lead=lead)
    )
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def replies_run(
    tenant_id: int,
    conversation_id: int,
    *,
    token: str | None = None,
    first: turns.NextTurn | None = None,
    lead: Sequence[Addressed] = (),
    max_turns: int | None = None,
    attempted: set[int] | None = None,
) -> bool:
    """Answer every waiting user message of the conversation, oldest first; returns when the
    queue is empty. Only one runner per conversation holds the lock. A runner that finds the
    lock taken leaves a "look again" flag for the holder, which checks it after letting go;
    taking the lock once more after setting the flag closes the gap where the holder let go
    and checked just before the flag was set.

    ``token``: the lock, when the caller took it already (the runner lets it go). With it,
    ``first``: the queue's first turn, when the caller prepared it already, and ``lead``:
    events for the conversation's sockets not sent yet (the new message's own event), which
    go out with the first reply's first delta, or with the lock's release if no reply
    streams. Both only count while the caller's token holds the lock.

    ``max_turns``: answer at most this many messages, then let go of the lock and return True
    when messages (or a "look again" flag) are left for the caller to hand on; a background
    job answers a bounded amount of work per run this way. ``attempted``: the messages this
    runner (or the runs before it) already tried, which it does not try again; updated in
    place. Returns False when nothing is left waiting for it."""
    lock_name = runner_lock_name(tenant_id, conversation_id)
    hub = coordination()
    attempted = set() if attempted is None else attempted
    answered = 0
    #: Messages left waiting because ``max_turns`` was reached.
    left_waiting = False
    #: Events not sent yet, handed once to whatever sends next.
    pending: tuple[Addressed, ...] = tuple(lead) if token is not None else ()
    if token is None:
        first = None
    while True:
        if token is None:
            token = await hub.acquire(lock_name)
        if token is None:
            await hub.request_recheck(lock_name)
            token = await hub.acquire(lock_name)
            if token is None:
                return False
        # The last reply's closing event goes out in the same round trip as the release.
        closing: dict[str, Any] | None = None
        try:
            async with keep_alive(hub, lock_name, token):
                more = True
                while more:
                    try:
                        if first is not None:
                            found, first = first, None
                        else:
                            found = await db(turns.turn_prepare_next)(
                                tenant_id, conversation_id, frozenset(attempted)
                            )
                    except Exception:
                        # The database is unreachable: the messages stay waiting, and the next
                        # message (or a resend, or the recovery sweep) starts a runner.
                        logger.exception("the reply queue of %s failed", conversation_id)
                        return False
                    attempted.update(found.tried)
                    for unanswered in found.failures:
                        failure = unanswered.event()
                        await emit(tenant_id, conversation_id, [failure], leading=pending)
                        pending = ()
                    if found.prepared is None:
                        break
                    lead_now, pending = pending, ()
                    closing = await _answer(found.prepared, (lock_name, token), lead=lead_now)
                    answered += 1
                    more = found.more
                    if more and max_turns is not None and answered >= max_turns:
                        left_waiting = True  # the rest is the caller's to hand on
                        break
                    if more and closing is not None:
                        await broadcast(tenant_id, conversation_id, closing)
                        closing = None
        finally:
            last = [*pending, *([(closing, "")] if closing is not None else [])]
            pending = ()
            recheck = await _send_and_release(hub, tenant_id, conversation_id, last, token)
        if max_turns is not None and answered >= max_turns:
            return left_waiting or recheck
        if not recheck:
            return False
        token = None


async def _send_and_release(
    hub: Coordination,
    tenant_id: int,
    conversation_id: int,
    addressed: Sequence[Addressed],
    token: str,
) -> bool:
    """Send a runner's last events, then let go of its lock; returns whether a recheck was
    asked for while it was held. On the Redis pub/sub channel layer both are one pipelined
    round trip; elsewhere each is its own call."""
    lock = (runner_lock_name(tenant_id, conversation_id), token)
    publishes = direct_publishes_for(tenant_id, conversation_id, addressed, hub)
    if publishes is not None and isinstance(hub, RedisCoordination):
        recheck = await hub.publish(publishes, release=lock)
        return recheck
    await group_send(tenant_id, conversation_id, addressed)
    return await hub.release(*lock)


async def _answer(
    prepared: turns.PreparedTurn, lock: tuple[str, str], *, lead: Sequence[Addressed]
) -> dict[str, Any] | None:
    """Answer one prepared turn; returns the closing event (``done`` or ``error``) for the
    caller to send, None when another runner answers it. An unexpected failure marks the
    reply failed, instead of leaving the message without an outcome. ``lead``: events to
    send before the reply's first delta, sent by the reply whatever becomes of it."""
    message_id = prepared.user_message_id
    try:
        return await _reply(prepared, lock=lock, lead=lead)
    except Exception:
        logger.exception("reply to message %s failed unexpectedly", message_id)
        reply_id = await db(turns.internal_error_record)(prepared.tenant_id, message_id)
        return internal_error_event(reply_id)


async def _reply(
    prepared: turns.PreparedTurn,
    *,
    lock: tuple[str, str] | None = None,
    lead: Sequence[Addressed] = (),
) -> dict[str, Any] | None:
    """Stream and store the reply of a prepared turn. Never raises for provider failures:
    the reply ends ``complete``, ``incomplete`` (partial text kept) or ``failed``. Returns
    the closing event for the clients (``done`` or ``error``), which the caller sends once
    stored; None when another runner took the turn over."""
    tenant_id, user_message_id = prepared.tenant_id, prepared.user_message_id
    try:
        return await _stream(prepared, lock=lock, lead=lead)
    except PromptTooLong as exc:
        # Our estimate was low: re-assemble once with a smaller budget, and learn from it.
        if exc.prompt_tokens:
            await db(_calibrate)(prepared, exc.prompt_tokens)
        smaller = int(prepared.estimated_prompt_tokens * 0.85)
        if exc.prompt_tokens and exc.max_tokens:
            smaller = min(
                smaller,
                int(prepared.estimated_prompt_tokens * exc.max_tokens / exc.prompt_tokens * 0.95),
            )
        retry = await db(turns.turn_prepare)(
            tenant_id, user_message_id, budget_override=max(smaller, MIN_RETRY_BUDGET)
        )
        if retry is None:
            return None
        try:
            return await _stream(retry, lock=lock)
        except PromptTooLong as again:
            return await failed(retry, "", again)


def _calibrate(prepared: turns.PreparedTurn, reported: int) -> None:
    with tenant_scope(prepared.tenant_id):
        profile_id = (
            ModelProfile.objects.filter(model=prepared.request.model)
            .values_list("pk", flat=True)
            .first()
        )
    if profile_id is not None:
        calibration_record(profile_id, prepared.estimated_prompt_tokens, reported)


async def _execute_tool(prepared: turns.PreparedTurn, call: ToolCall) -> str:
    if prepared.user_id is None:
        return json.dumps({"error": "this message has no user to remember facts for"})
    result = await db(execute_tool)(
        call.name,
        call.input,
        tenant_id=prepared.tenant_id,
        user_id=prepared.user_id,
        message_id=prepared.user_message_id,
    )
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


async def _stream(
    prepared: turns.PreparedTurn,
    *,
    lock: tuple[str, str] | None,
    lead: Sequence[Addressed] = (),
) -> dict[str, Any]:
    """Stream one reply; ``lead`` goes out before the reply's own events, however it ends."""
    hub = coordination()
    tenant_id, conversation_id = prepared.tenant_id, prepared.conversation_id
    message_id = prepared.assistant_message_id
    try:
        if prepared.profile.uses_own_endpoint:
            # In a thread: checking a tenant's endpoint resolves its host name (blocking DNS).
            provider = await asyncio.to_thread(_provider_factory, prepared)
        else:
            provider = _provider_factory(prepared)
    except Exception as exc:
        if lead:  # the events due before the reply's own still go first
            await DeltaSender(hub, tenant_id, conversation_id, message_id, lead=lead).flush()
        if isinstance(exc, ProviderError):  # a refused endpoint: the reply fails, the message stays
            return await failed(prepared, "", exc)
        raise
    announcement = {
        "type": "reply",
        "message_id": message_id,
        "answers": prepared.user_message_id,
        "offline": bool(getattr(provider, "offline", False)),
    }
    started = time.monotonic()
    first_token: float | None = None
    last_flush = last_stop_check = started
    parts: list[str] = []
    seq = 0
    usage: Usage | None = None
    stop_reason = ""
    managed = ProviderManaged()
    client_calls: list[dict[str, Any]] = []
    if prepared.tools:
        events = stream_with_tools(
            provider,
            prepared.request,
            lambda call: _execute_tool(prepared, call),
            client_tools=prepared.client_tools,
        )
    else:
        events = provider.stream(prepared.request)
    deltas = DeltaSender(
        hub, tenant_id, conversation_id, message_id, lead=(*lead, (announcement, ""))
    )
    try:
        async for event in events:
            if isinstance(event, TextDelta) and event.text:
                if first_token is None:
                    first_token = time.monotonic()
                parts.append(event.text)
                deltas.add(event.text)
                now = time.monotonic()
                if now - last_flush >= FLUSH_INTERVAL:
                    last_flush = now
                    await db(turns.reply_content_flush)(tenant_id, message_id, "".join(parts))
                if now - last_stop_check >= STOP_CHECK_INTERVAL:
                    last_stop_check = now
                    if lock is not None:
                        await hub.refresh(*lock)
                    if await hub.take_stop(tenant_id, conversation_id):
                        seq = await deltas.flush()
                        return await stopped(
                            prepared, "".join(parts), seq, started, first_token, usage
                        )
            elif isinstance(event, ToolCall) and event.name in prepared.client_tools:
                client_calls.append({"id": event.id, "name": event.name, "input": event.input})
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Compaction | ContextEdited):
                managed.take(event)
            elif isinstance(event, Done):
                usage, stop_reason = event.usage or usage, event.stop_reason
        seq = await deltas.flush()
    except PromptTooLong:
        seq = await deltas.flush()
        if parts:
            interrupted = StreamInterrupted(
                "prompt too long after deltas", partial_text="".join(parts)
            )
            return await failed(prepared, "".join(parts), interrupted, seq=seq)
        raise
    except ProviderError as exc:
        seq = await deltas.flush()
        return await failed(prepared, "".join(parts), exc, seq=seq, usage=usage)
    finally:
        await deltas.flush()  # no sending task outlives the reply, whatever ended it
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    content = "".join(parts)
    timing = (elapsed_ms(started, first_token), elapsed_ms(started, time.monotonic()))
    if stop_reason in CUT_SHORT:
        return await cut_short(
            prepared, content, stop_reason, seq=seq, usage=usage, managed=managed, timing=timing
        )
    # The tools the client runs: their calls end the reply (the client sends the results).
    tool_calls = client_calls if stop_reason == "tool_use" else []
    summary = await db(turns.turn_finish)(
        prepared,
        content=content,
        status=Status.COMPLETE,
        usage=usage,
        ttft_ms=timing[0],
        duration_ms=timing[1],
        managed=managed,
        tool_calls=tool_calls,
    )
    done: dict[str, Any] = {
        "type": "done",
        "message_id": message_id,
        "status": Status.COMPLETE,
        "last_seq": seq,
        "usage": summary,
    }
    if tool_calls:
        done["tool_calls"] = tool_calls
    return done
