"""Anthropic Messages on the wire: the request as the platform reads it, the message object
and the stream's events exactly as the ``anthropic`` SDK parses them."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from chatplatform.models.conversations import Conversation, Status
from chats.api.compat.images import ImageRef, anthropic_image, new_message_image
from chats.api.compat.outcomes import EXTENSION_FIELD, Outcome, outcome_of
from chats.api.compat.threads import invalid
from chats.api.compat.transcript import ASSISTANT, USER, Turn
from chats.replies.db import db

#: Fields the platform does not offer on this endpoint yet: refused, never silently dropped.
UNSUPPORTED = ("tools", "tool_choice", "thinking", "mcp_servers", "container")
KEEPALIVE = b'event: ping\ndata: {"type":"ping"}\n\n'


@dataclass(frozen=True)
class MessagesCall:
    """A Messages request: the client's turns and system prompt, how to answer."""

    turns: list[Turn]
    system: str
    stream: bool
    #: The image of the client's new message, if it carries one.
    image: ImageRef | None = None


def _content(content: Any, where: str, *, images: bool = True) -> tuple[str, list[ImageRef]]:
    """A message's text (its text blocks joined) and its images (``images``: allowed)."""
    if isinstance(content, str):
        return content, []
    if isinstance(content, list):
        parts: list[str] = []
        found: list[ImageRef] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "image" and images:
                found.append(anthropic_image(block, where))
                continue
            if kind != "text":
                allowed = "text or image" if images else "text"
                raise invalid(f"{where}: content blocks must be {allowed}.")
            if not isinstance(block.get("text"), str):
                raise invalid(f"{where}: a text block needs its text.")
            parts.append(block["text"])
        return "\n".join(parts), found
    raise invalid(f"{where}.content must be a string or a list of content blocks.")


def messages_call(data: Any, *, counting: bool = False) -> MessagesCall:
    """The request body read (400 naming the parameter otherwise); ``counting``: a
    ``count_tokens`` body (no ``max_tokens``, no ``stream``)."""
    if not isinstance(data, dict):
        raise invalid("The body must be a JSON object.", "body")
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise invalid("model: Field required (any name; the tenant's policy picks it).", "model")
    max_tokens = data.get("max_tokens")
    if not counting and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise invalid("max_tokens: a positive integer is required.", "max_tokens")
    for name in UNSUPPORTED:
        if data.get(name):
            raise invalid(f"{name} is not supported by this endpoint.", name)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages: at least one message is required.")
    turns: list[Turn] = []
    trailing: list[ImageRef] = []  # the images of the user turn the request ends with
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (USER, ASSISTANT):
            raise invalid(f"messages.{index}.role must be user or assistant.")
        text, images = _content(message.get("content"), f"messages.{index}")
        turns.append((str(message["role"]), text))
        trailing = trailing + images if message["role"] == USER else []
    system = data.get("system") or ""
    stream = data.get("stream") or False
    if not isinstance(stream, bool):
        raise invalid("stream must be a boolean.", "stream")
    return MessagesCall(
        turns=turns,
        system=_content(system, "system", images=False)[0].strip(),
        stream=stream,
        image=new_message_image(trailing),
    )


def message_id(user_message_id: int) -> str:
    return f"msg_{user_message_id}"


def stop_reason(outcome: Outcome) -> str:
    return "max_tokens" if outcome.cut_at_length else "end_turn"


def usage(outcome: Outcome) -> dict[str, int]:
    tokens = outcome.tokens
    return {
        "input_tokens": tokens.uncached,
        "output_tokens": tokens.output,
        "cache_creation_input_tokens": tokens.cache_write,
        "cache_read_input_tokens": tokens.cache_read,
    }


def message(outcome: Outcome, model: str) -> dict[str, Any]:
    """The ``message`` object of a final reply."""
    reply = outcome.reply
    return {
        "id": message_id(outcome.message_id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply.content if reply is not None else ""}],
        "stop_reason": stop_reason(outcome),
        "stop_sequence": None,
        "usage": usage(outcome),
        EXTENSION_FIELD: outcome.extension(),
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    payload = json.dumps({"type": name, **data}, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


async def message_events(
    ack: dict[str, Any],
    items: AsyncGenerator[tuple[str, dict[str, Any]] | None, None],
    *,
    conversation: Conversation,
    model: str,
    error_body: Any,
) -> AsyncGenerator[bytes, None]:
    """The reply's events (:func:`chats.api.streaming.reply_items`, after its ``ack``) in the
    Messages API's order: ``message_start``, ``content_block_start``, ``ping``, the
    ``content_block_delta``s, ``content_block_stop``, ``message_delta`` (stop reason, usage,
    and the extension field), ``message_stop``. A reply that fails ends with an ``error``
    event (the SDK raises it); ``error_body(status, message, code)`` shapes it."""
    user_message_id = int(ack["message_id"])
    start: dict[str, Any] = {
        "id": message_id(user_message_id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    try:
        yield _event("message_start", {"message": start})
        yield _event(
            "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
        )
        yield _event("ping", {})
        async for item in items:
            if item is None:
                yield KEEPALIVE
                continue
            name, event = item
            text = ""
            if name == "reply_state" and event["status"] in (Status.COMPLETE, Status.INCOMPLETE):
                text = event.get("content") or ""
            elif name == "delta":
                text = event["text"]
            if text:
                delta = {"type": "text_delta", "text": text}
                yield _event("content_block_delta", {"index": 0, "delta": delta})
            if name not in ("done", "error"):
                continue
            outcome = await db(outcome_of)(conversation, user_message_id)
            if outcome.failed:
                text = str(event.get("message") or "The reply failed.")
                body = error_body(502, text, str(event.get("code") or "provider_error"))
                yield f"event: error\ndata: {json.dumps(body)}\n\n".encode()
                return
            yield _event("content_block_stop", {"index": 0})
            yield _event(
                "message_delta",
                {
                    "delta": {"stop_reason": stop_reason(outcome), "stop_sequence": None},
                    "usage": usage(outcome),
                    EXTENSION_FIELD: outcome.extension(),
                },
            )
            yield _event("message_stop", {})
            return
    finally:
        await items.aclose()
