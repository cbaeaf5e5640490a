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
from collections.abc import Callable
from typing import Any

from django.conf import settings

from chatplatform.core.llm.base import Done, Provider, TextDelta, ToolCall, Usage
from chatplatform.core.llm.errors import PromptTooLong, ProviderError, StreamInterrupted
from chatplatform.core.llm.registry import build_provider_or_offline
from chatplatform.core.llm.tool_loop import stream_with_tools
from chatplatform.model_endpoints import provider_access
from chatplatform.models.conversations import Status
from chats.replies import turns
from chats.replies.coordination import coordination, keep_alive, runner_lock_name
from chats.replies.db import db
from chats.replies.deltas import DeltaSender
from chats.replies.events import Addressed, broadcast, emit

logger = logging.getLogger(__name__)

#: The reply is written to the database at most this often while it streams (seconds).
FLUSH_INTERVAL = 0.5
#: The smallest prompt budget a "prompt is too long" retry shrinks to (tokens).
MIN_RETRY_BUDGET = 512
#: How often the stop flag is checked while streaming (seconds).
STOP_CHECK_INTERVAL = 0.2

ProviderFactory = Callable[[turns.PreparedTurn], Provider]
_background: set[asyncio.Task[Any]] = set()


def default_provider(prepared: turns.PreparedTurn) -> Provider:
    """The provider of the turn's model; the offline one when no credentials are set.
    Raises :class:`EndpointRefused` for a tenant's endpoint the operator does not allow
    (checked at every call: a DNS answer can change since the profile was saved)."""
    access = provider_access(prepared.profile)
    if access is None:
        return build_provider_or_offline("offline")
    access.check()
    return build_provider_or_offline(
        access.provider,
        api_key=access.api_key,
        base_url=access.base_url,
        timeout=settings.LLM_TIMEOUT_SECONDS,
    )


_provider_factory: ProviderFactory = default_provider


def set_provider_factory(factory: ProviderFactory | None) -> None:
    """Swap how providers are built (benchmarks use an instant provider)."""
    global _provider_factory
    _provider_factory = factory or default_provider


def start_runner(
    tenant_id: int,
    conversation_id: int,
    *,
    token: str | None = None,
    first: turns.NextTurn | None = None,
    lead: list[Addressed] | None = None,
) -> asyncio.Task[Any]:
    """Run the conversation's replies in the background of the current event loop; the
    arguments are as for :func:`run_replies`."""
    task = asyncio.create_task(
        run_replies(tenant_id, conversation_id, token=token, first=first, lead=lead)
    )
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def run_replies(
    tenant_id: int,
    conversation_id: int,
    *,
    token: str | None = None,
    first: turns.NextTurn | None = None,
    lead: list[Addressed] | None = None,
) -> None:
    """Answer every waiting user message of the conversation, oldest first; returns when the
    queue is empty. Only one runner per conversation holds the lock. A runner that finds the
    lock taken leaves a "look again" flag for the holder, which checks it after letting go;
    taking the lock once more after setting the flag closes the gap where the holder let go
    and checked just before the flag was set.

    ``token``: the lock, when the caller took it already (the runner lets it go). With it,
    ``first``: the queue's first turn, when the caller prepared it already, and ``lead``:
    events for the conversation's sockets not sent yet (the new message's own event), which
    go out with the first reply's first delta, or with the lock's release if no reply
    streams. Both only count while the caller's token holds the lock."""
    lock_name = runner_lock_name(tenant_id, conversation_id)
    hub = coordination()
    attempted: set[int] = set()
    pending: list[Addressed] = lead if lead is not None and token is not None else []
    if token is None:
        first = None
    while True:
        if token is None:
            token = await hub.acquire(lock_name)
        if token is None:
            await hub.request_recheck(lock_name)
            token = await hub.acquire(lock_name)
            if token is None:
                return
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
                            found = await db(turns.prepare_next_turn)(
                                tenant_id, conversation_id, frozenset(attempted)
                            )
                    except Exception:
                        # The database is unreachable: the messages stay waiting, and the next
                        # message (or a resend, or the recovery sweep) starts a runner.
                        logger.exception("the reply queue of %s failed", conversation_id)
                        return
                    attempted.update(found.tried)
                    for _message_id, reply_id in found.failures:
                        await emit(
                            tenant_id, conversation_id, [_internal_error(reply_id)], leading=pending
                        )
                        pending.clear()
                    if found.prepared is None:
                        break
                    closing = await _answer(found.prepared, (lock_name, token), lead=pending)
                    more = found.more
                    if more and closing is not None:
                        await broadcast(tenant_id, conversation_id, closing)
                        closing = None
        finally:
            recheck, _ = await emit(
                tenant_id,
                conversation_id,
                [closing] if closing is not None else [],
                release=(lock_name, token),
                leading=pending[:],
            )
            pending.clear()
        if not recheck:
            return
        token = None


async def _answer(
    prepared: turns.PreparedTurn, lock: tuple[str, str], *, lead: list[Addressed]
) -> dict[str, Any] | None:
    """Answer one prepared turn; returns the closing event (``done`` or ``error``) for the
    caller to send, None when another runner answers it. An unexpected failure marks the
    reply failed, instead of leaving the message without an outcome. ``lead``: events to
    send before the reply's first delta; what is still in it on return was not sent."""
    message_id = prepared.user_message_id
    try:
        return await _reply(prepared, lock=lock, lead=lead)
    except Exception:
        logger.exception("reply to message %s failed unexpectedly", message_id)
        reply_id = await db(turns.record_internal_error)(prepared.tenant_id, message_id)
        return _internal_error(reply_id)


def _internal_error(reply_id: int | None) -> dict[str, Any]:
    return {
        "type": "error",
        "code": "internal_error",
        "message": turns.INTERNAL_ERROR_TEXT,
        "message_id": reply_id,
        "status": "failed",
        "partial": False,
        "retryable": True,
    }


async def _reply(
    prepared: turns.PreparedTurn,
    *,
    lock: tuple[str, str] | None = None,
    lead: list[Addressed] | None = None,
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
        retry = await db(turns.prepare_turn)(
            tenant_id, user_message_id, budget_override=max(smaller, MIN_RETRY_BUDGET)
        )
        if retry is None:
            return None
        try:
            return await _stream(retry, lock=lock)
        except PromptTooLong as again:
            return await _fail(retry, "", again)


def _calibrate(prepared: turns.PreparedTurn, reported: int) -> None:
    from chatplatform.models import ModelProfile
    from chatplatform.tenancy.scoping import tenant_scope

    with tenant_scope(prepared.tenant_id):
        profile_id = (
            ModelProfile.objects.filter(model=prepared.request.model)
            .values_list("pk", flat=True)
            .first()
        )
    if profile_id is not None:
        turns.calibration_record(profile_id, prepared.estimated_prompt_tokens, reported)


async def _execute_tool(prepared: turns.PreparedTurn, call: ToolCall) -> str:
    try:
        from memory.tools import execute_tool
    except ImportError:
        return json.dumps({"error": "memory tools are not available"})
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
    lead: list[Addressed] | None = None,
) -> dict[str, Any]:
    hub = coordination()
    tenant_id, conversation_id = prepared.tenant_id, prepared.conversation_id
    message_id = prepared.assistant_message_id
    try:
        if prepared.profile.uses_own_endpoint:
            # In a thread: checking a tenant's endpoint resolves its host name (blocking DNS).
            provider = await asyncio.to_thread(_provider_factory, prepared)
        else:
            provider = _provider_factory(prepared)
    except ProviderError as exc:  # a refused endpoint: the reply fails, the message stays
        seq = 0
        if lead:  # the events due before the reply's own still go first
            seq = await DeltaSender(hub, tenant_id, conversation_id, message_id, lead=lead).flush()
        return await _fail(prepared, "", exc, seq=seq)
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
    if prepared.tools:
        events = stream_with_tools(
            provider, prepared.request, lambda call: _execute_tool(prepared, call)
        )
    else:
        events = provider.stream(prepared.request)
    lead = lead if lead is not None else []
    lead.append((announcement, ""))
    deltas = DeltaSender(hub, tenant_id, conversation_id, message_id, lead=lead)
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
                    await db(turns.flush_content)(tenant_id, message_id, "".join(parts))
                if now - last_stop_check >= STOP_CHECK_INTERVAL:
                    last_stop_check = now
                    if lock is not None:
                        await hub.refresh(*lock)
                    if await hub.take_stop(tenant_id, conversation_id):
                        seq = await deltas.flush()
                        return await _stopped(prepared, "".join(parts), seq, started, first_token)
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Done):
                usage = event.usage or usage
        seq = await deltas.flush()
    except PromptTooLong:
        seq = await deltas.flush()
        if parts:
            interrupted = StreamInterrupted(
                "prompt too long after deltas", partial_text="".join(parts)
            )
            return await _fail(prepared, "".join(parts), interrupted, seq=seq)
        raise
    except ProviderError as exc:
        seq = await deltas.flush()
        return await _fail(prepared, "".join(parts), exc, seq=seq)
    finally:
        await deltas.flush()  # no sending task outlives the reply, whatever ended it
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    content = "".join(parts)
    summary = await db(turns.finish_turn)(
        prepared,
        content=content,
        status=Status.COMPLETE,
        usage=usage,
        ttft_ms=_ms(started, first_token),
        duration_ms=_ms(started, time.monotonic()),
    )
    done: dict[str, Any] = {
        "type": "done",
        "message_id": message_id,
        "status": Status.COMPLETE,
        "last_seq": seq,
        "usage": summary,
    }
    return done


def _ms(start: float, end: float | None) -> int | None:
    return None if end is None else int((end - start) * 1000)


async def _stopped(
    prepared: turns.PreparedTurn, content: str, seq: int, started: float, first: float | None
) -> dict[str, Any]:
    summary = await db(turns.finish_turn)(
        prepared,
        content=content,
        status=Status.INCOMPLETE,
        error_code="stopped",
        error_message="Stopped by the user.",
        ttft_ms=_ms(started, first),
        duration_ms=_ms(started, time.monotonic()),
    )
    event = {
        "type": "done",
        "message_id": prepared.assistant_message_id,
        "status": Status.INCOMPLETE,
        "stopped": True,
        "last_seq": seq,
        "usage": summary,
    }
    return event


async def _fail(
    prepared: turns.PreparedTurn, partial: str, exc: ProviderError, *, seq: int = 0
) -> dict[str, Any]:
    partial = partial or getattr(exc, "partial_text", "") or ""
    status = Status.INCOMPLETE if partial else Status.FAILED
    code = getattr(exc, "code", "") or "provider_error"
    message = _human_error(exc, bool(partial))
    logger.warning("reply %s %s: %s", prepared.assistant_message_id, status, exc)
    await db(turns.finish_turn)(
        prepared, content=partial, status=status, error_code=code[:40], error_message=message
    )
    event = {
        "type": "error",
        "code": code,
        "message": message,
        "message_id": prepared.assistant_message_id,
        "status": status,
        "partial": bool(partial),
        "last_seq": seq,
        "retryable": bool(getattr(exc, "retryable", False)) or status == Status.FAILED,
    }
    return event


def _human_error(exc: ProviderError, partial: bool) -> str:
    base = {
        "rate_limited": "The model provider is rate-limiting requests.",
        "spend_cap_reached": "The model provider's spending limit was reached.",
        "overloaded": "The model provider is overloaded.",
        "prompt_too_long": "The conversation did not fit the model's window.",
        "provider_unavailable": "The model provider could not be reached.",
        "stream_stalled": "The model stopped sending its reply.",
        "stream_interrupted": "The model's reply was interrupted.",
        "request_too_large": "The request was too large for the model provider.",
        "authentication_failed": "The model provider refused the platform's credentials.",
    }.get(getattr(exc, "code", ""), "The model provider returned an error.")
    if getattr(exc, "code", "") == "endpoint_refused":
        base = f"The model's endpoint is not allowed here: {exc.message}."
    tail = " The text received so far is kept." if partial else " Send the message again to retry."
    return base + tail
