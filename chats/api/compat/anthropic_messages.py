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
from chats.api.compat.tool_use import (
    call_id,
    offer,
    result_text,
    stored_calls,
    tool_spec,
    tool_specs,
)
from chats.api.compat.transcript import ASSISTANT, TOOL, USER, Turn, tool_turn
from chats.replies.db import db

#: Fields the platform does not offer on this endpoint yet: refused, never silently dropped.
UNSUPPORTED = ("thinking", "mcp_servers", "container")
KEEPALIVE = b'event: ping\ndata: {"type":"ping"}\n\n'


@dataclass(frozen=True)
class MessagesCall:
    """A Messages request: the client's turns and system prompt, how to answer."""

    turns: list[Turn]
    system: str
    stream: bool
    #: The image of the client's new message, if it carries one.
    image: ImageRef | None = None
    #: The tools the client offers the reply (:func:`chats.api.compat.tool_use.offer`).
    offered: dict[str, Any] | None = None


def _custom(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") not in (None, "custom"):
        raise invalid(
            f"{where}: only the client's own tools (name, input_schema) are taken; "
            "Anthropic's server tools run at Anthropic only.",
            "tools",
        )
    return tool_spec(tool.get("name"), tool.get("description"), tool.get("input_schema"), where)


def _tools(data: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``tools`` (the client's own, defined by a schema) and ``tool_choice``."""
    specs = tool_specs(data, _custom)
    choice = data.get("tool_choice") or {"type": "auto"}
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in ("auto", "any", "none", "tool"):
        raise invalid("tool_choice.type must be auto, any, none or tool.", "tool_choice")
    return offer(specs, kind, str(choice.get("name") or ""))


def _turns(message: dict[str, Any], index: int) -> tuple[list[Turn], list[ImageRef]]:
    """One message's turns: a user message's tool results (first) and its text; an assistant
    message's text with its tool calls."""
    role, content, where = str(message["role"]), message.get("content"), f"messages.{index}"
    blocks = content if isinstance(content, list) else []
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    calls = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    if not results and not calls:
        text, images = _content(content, where)
        return [(role, text)], images
    rest = [b for b in blocks if b not in results and b not in calls]
    text, images = _content(rest, where, images=role == USER)
    if role == ASSISTANT:
        if results:
            raise invalid(f"{where}: tool results belong in a user message.")
        stored = [
            {
                "id": call_id(b.get("id"), where),
                "name": str(b.get("name") or ""),
                "input": b.get("input") if isinstance(b.get("input"), dict) else {},
            }
            for b in calls
        ]
        return [tool_turn(ASSISTANT, text, stored)], []
    if calls:
        raise invalid(f"{where}: tool calls belong in an assistant message.")
    answered = [
        {
            "tool_use_id": call_id(b.get("tool_use_id"), where),
            "content": result_text(b.get("content"), where),
            "is_error": bool(b.get("is_error")),
        }
        for b in results
    ]
    turns: list[Turn] = [tool_turn(TOOL, "", answered)]
    if text.strip() or images:
        turns.append((USER, text))
    return turns, images


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
        found, images = _turns(message, index)
        turns.extend(found)
        trailing = trailing + images if found[-1][0] == USER else []
    system = data.get("system") or ""
    stream = data.get("stream") or False
    if not isinstance(stream, bool):
        raise invalid("stream must be a boolean.", "stream")
    return MessagesCall(
        turns=turns,
        system=_content(system, "system", images=False)[0].strip(),
        stream=stream,
        image=new_message_image(trailing),
        offered=_tools(data),
    )


def message_id(user_message_id: int) -> str:
    return f"msg_{user_message_id}"


def stop_reason(outcome: Outcome) -> str:
    if stored_calls(outcome.reply):
        return "tool_use"
    return "max_tokens" if outcome.cut_at_length else "end_turn"


def _call_blocks(outcome: Outcome) -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["input"]}
        for c in stored_calls(outcome.reply)
    ]


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
    calls = _call_blocks(outcome)
    return {
        "id": message_id(outcome.message_id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            *(
                [{"type": "text", "text": text}]
                if (text := reply.content if reply is not None else "") or not calls
                else []
            ),
            *calls,
        ],
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
            for index, block in enumerate(_call_blocks(outcome), start=1):
                yield _event(
                    "content_block_start", {"index": index, "content_block": {**block, "input": {}}}
                )
                partial = json.dumps(block["input"], ensure_ascii=False)
                delta = {"type": "input_json_delta", "partial_json": partial}
                yield _event("content_block_delta", {"index": index, "delta": delta})
                yield _event("content_block_stop", {"index": index})
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
