"""How a reply ends when it does not complete: stopped by the user, failed or cut short by
the provider (an error, or a limit it reached: the reply's length or the model's window), or
failed unexpectedly. Each stores the reply's outcome and returns the closing
event the conversation's sockets get (the runner sends it)."""

from __future__ import annotations

import logging
import time
from http import HTTPStatus
from typing import Any

from chatplatform.audit import endpoint_refused_record
from chatplatform.core.llm.endpoints import EndpointRefused
from chatplatform.core.llm.errors import ProviderError
from chatplatform.models.conversations import Status
from chats.replies import turns
from chats.replies.db import db

logger = logging.getLogger(__name__)


def internal_error_event(reply_id: int | None) -> dict[str, Any]:
    """The closing event of a reply that failed for a reason of ours, not the provider's."""
    return turns.Unanswered(reply_id, "internal_error", turns.INTERNAL_ERROR_TEXT).event()


def elapsed_ms(start: float, end: float | None) -> int | None:
    return None if end is None else int((end - start) * 1000)


async def stopped(
    prepared: turns.PreparedTurn,
    content: str,
    seq: int,
    started: float,
    first: float | None,
    usage: Any = None,
) -> dict[str, Any]:
    """A reply the user stopped: incomplete, the text kept, and its prompt billed (the
    provider started answering it): the usage reported before the stop, else the prompt as
    the provider's cache would have billed it."""
    summary = await db(turns.turn_finish)(
        prepared,
        content=content,
        status=Status.INCOMPLETE,
        usage=usage,
        error_code="stopped",
        error_message="Stopped by the user.",
        ttft_ms=elapsed_ms(started, first),
        duration_ms=elapsed_ms(started, time.monotonic()),
        prompt_sent=True,
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


#: Stop reasons that end a reply before the model finished it, with what the person reads.
CUT_SHORT = {
    "max_tokens": "The reply reached the length limit the policy reserves for it.",
    "model_context_window_exceeded": "The reply filled the model's context window.",
}


async def cut_short(
    prepared: turns.PreparedTurn,
    content: str,
    stop_reason: str,
    *,
    seq: int,
    usage: Any,
    managed: Any,
    timing: tuple[int | None, int | None],
) -> dict[str, Any]:
    """A reply the provider ended at a limit (``CUT_SHORT``): incomplete, the text kept, the
    turn priced and recorded like any other."""
    message = CUT_SHORT[stop_reason] + (
        " The text received so far is kept." if content else " Nothing was written."
    )
    summary = await db(turns.turn_finish)(
        prepared,
        content=content,
        status=Status.INCOMPLETE if content else Status.FAILED,
        usage=usage,
        error_code=stop_reason[:40],
        error_message=message,
        ttft_ms=timing[0],
        duration_ms=timing[1],
        managed=managed,
    )
    return {
        "type": "error",
        "code": stop_reason,
        "message": message,
        "message_id": prepared.assistant_message_id,
        "status": Status.INCOMPLETE if content else Status.FAILED,
        "partial": bool(content),
        "last_seq": seq,
        # Sending it again would hit the same limit; the policy is what to change.
        "retryable": False,
        "usage": summary,
    }


async def failed(
    prepared: turns.PreparedTurn,
    partial: str,
    exc: ProviderError,
    *,
    seq: int = 0,
    usage: Any = None,
) -> dict[str, Any]:
    """A reply the provider failed. Once it had started answering (text or a usage report
    came), the prompt was billed and is recorded as such."""
    partial = partial or getattr(exc, "partial_text", "") or ""
    status = Status.INCOMPLETE if partial else Status.FAILED
    code = getattr(exc, "code", "") or "provider_error"
    message = human_error(exc, bool(partial))
    logger.warning("reply %s %s: %s", prepared.assistant_message_id, status, exc)
    await db(turns.turn_finish)(
        prepared,
        content=partial,
        status=status,
        usage=usage,
        error_code=code[:40],
        error_message=message,
        prompt_sent=bool(partial),
    )
    if isinstance(exc, EndpointRefused):
        await db(endpoint_refused_record)(
            tenant_id=prepared.tenant_id, profile=prepared.profile, reason=str(exc)
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


#: What the person is told, by error code (the codes themselves are what clients rely on).
#: ``provider_unavailable`` (the provider was reached and failed) is worded by
#: :func:`server_failure_text`; ``connection_error`` and ``timeout`` are the only failures
#: that say the provider could not be reached.
FAILURE_TEXT = {
    "rate_limited": "The model provider is rate-limiting requests.",
    "spend_cap_reached": "The model provider's spending limit was reached.",
    "overloaded": "The model provider is overloaded.",
    "prompt_too_long": "The conversation did not fit the model's window.",
    "connection_error": "The model provider could not be reached.",
    "timeout": "The model provider could not be reached in time (the request timed out).",
    "stream_stalled": "The model stopped sending its reply.",
    "stream_interrupted": "The model's reply was interrupted.",
    "request_too_large": "The request was too large for the model provider.",
    "authentication_failed": "The model provider refused the platform's credentials.",
}


def human_error(exc: ProviderError, partial: bool) -> str:
    """The sentence a person reads about a failed reply: what happened, then what to do."""
    code = getattr(exc, "code", "")
    if code == "endpoint_refused":
        base = f"The model's endpoint is not allowed here: {exc.message}."
    elif code == "provider_unavailable":
        base = server_failure_text(exc.status_code)
    else:
        base = FAILURE_TEXT.get(code, "The model provider returned an error.")
    tail = " The text received so far is kept." if partial else " Send the message again to retry."
    return base + tail


def server_failure_text(status: int | None) -> str:
    """A provider that was reached but failed: a 5xx answer (named with its status), or an
    error inside its stream (no status)."""
    if status is None:
        return "The model provider had an error while answering."
    if status == HTTPStatus.INTERNAL_SERVER_ERROR:
        return f"The model provider had an internal error (HTTP {status})."
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""
    return f"The model provider answered with a server error (HTTP {status}{phrase})."
