"""OpenAI Chat Completions on the wire: the request as the platform reads it, the response
object and the stream's chunks exactly as the ``openai`` SDK parses them."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from chatplatform.models.conversations import Conversation, Status
from chats.api.compat.images import ImageRef, new_message_image, openai_image
from chats.api.compat.outcomes import EXTENSION_FIELD, Outcome, outcome_of
from chats.api.compat.threads import invalid
from chats.api.compat.tool_use import (
    call_id,
    openai_offer,
    result_text,
    stored_calls,
    tool_spec,
    tool_specs,
)
from chats.api.compat.transcript import ASSISTANT, TOOL, USER, Turn, tool_turn
from chats.replies.db import db

#: Roles whose text is the client's system prompt (framed after the platform's).
SYSTEM_ROLES = frozenset({"system", "developer"})
#: Fields the platform does not offer on this endpoint yet: refused, never silently dropped.
UNSUPPORTED = ("functions", "function_call", "audio", "prediction")
DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keepalive\n\n"


@dataclass(frozen=True)
class ChatCall:
    """A Chat Completions request: the client's turns and system prompt, how to answer."""

    turns: list[Turn]
    system: str
    stream: bool
    include_usage: bool
    conversation_id: Any
    #: The image of the client's new message, if it carries one.
    image: ImageRef | None = None
    #: The tools the client offers the reply (:func:`chats.api.compat.tool_use.offer`).
    offered: dict[str, Any] | None = None


def _function(tool: Any, where: str) -> dict[str, Any]:
    function = tool.get("function") if isinstance(tool, dict) else None
    if (
        not isinstance(tool, dict)
        or tool.get("type") != "function"
        or not isinstance(function, dict)
    ):
        raise invalid(f"{where} must be a function tool.", "tools")
    return tool_spec(
        function.get("name"), function.get("description"), function.get("parameters"), where
    )


def _forced(choice: dict[str, Any]) -> Any:
    named = choice.get("function") if choice.get("type") == "function" else None
    return named.get("name") if isinstance(named, dict) else None


def _tools(data: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``tools`` and ``tool_choice``."""
    return openai_offer(tool_specs(data, _function), data.get("tool_choice"), _forced)


def _calls(message: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """An assistant message's ``tool_calls`` as stored calls."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        raise invalid(f"messages[{index}].tool_calls must be a list.")
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise invalid(f"messages[{index}].tool_calls: each call names its function.")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = None
        if not isinstance(arguments, dict):
            raise invalid(f"messages[{index}].tool_calls: arguments must be a JSON object.")
        where = f"messages[{index}].tool_calls"
        out.append(
            {"id": call_id(call.get("id"), where), "name": function["name"], "input": arguments}
        )
    return out


def _content(content: Any, index: int) -> tuple[str, list[ImageRef]]:
    """A message's text (its text parts joined) and its images."""
    if isinstance(content, str):
        return content, []
    if isinstance(content, list):
        parts: list[str] = []
        images: list[ImageRef] = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url":
                images.append(openai_image(part, f"messages[{index}]"))
                continue
            if kind != "text":
                raise invalid(
                    f"messages[{index}]: content parts must be text or image_url.", "messages"
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise invalid(f"messages[{index}]: a text part needs its text.", "messages")
            parts.append(text)
        return "\n".join(parts), images
    raise invalid(f"messages[{index}].content must be a string or a list of content parts.")


def chat_call(data: Any, named: str | None) -> ChatCall:
    """The request body read (400 naming the parameter otherwise); ``named``: the
    conversation header's value."""
    if not isinstance(data, dict):
        raise invalid("The body must be a JSON object.", "body")
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise invalid("model is required (any of GET /models; the policy's is used).", "model")
    for name in UNSUPPORTED:
        if data.get(name):
            raise invalid(f"{name} is not supported by this endpoint.", name)
    if data.get("n") not in (None, 1):
        raise invalid("Only n=1 is supported.", "n")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages must be a non-empty list.")
    turns: list[Turn] = []
    system: list[str] = []
    trailing: list[ImageRef] = []  # the images of the user turn the request ends with
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise invalid(f"messages[{index}] must be an object.")
        role = message.get("role")
        if role == TOOL:
            where = f"messages[{index}]"
            result = {
                "tool_use_id": call_id(message.get("tool_call_id"), where),
                "content": result_text(message.get("content"), where),
                "is_error": False,
            }
            turns.append(tool_turn(TOOL, "", [result]))
            trailing = []
            continue
        if role == "function":
            raise invalid(f"messages[{index}]: function messages are the old API; use tools.")
        if role == ASSISTANT and message.get("tool_calls"):
            text, _ = _content(message.get("content") or "", index)
            turns.append(tool_turn(ASSISTANT, text, _calls(message, index)))
            trailing = []
            continue
        text, images = _content(message.get("content"), index)
        if role in SYSTEM_ROLES:
            if images:
                raise invalid(f"messages[{index}]: a system message cannot carry images.")
            system.append(text)
        elif role in (USER, ASSISTANT):
            turns.append((str(role), text))
            trailing = trailing + images if role == USER else []
        else:
            raise invalid(f"messages[{index}].role must be system, user or assistant.")
    stream = data.get("stream") or False
    options = data.get("stream_options") or {}
    metadata = data.get("metadata") or {}
    if not isinstance(stream, bool) or not isinstance(options, dict):
        raise invalid("stream must be a boolean and stream_options an object.", "stream")
    if not isinstance(metadata, dict):
        raise invalid("metadata must be an object.", "metadata")
    return ChatCall(
        turns=turns,
        system="\n\n".join(s for s in system if s.strip()),
        stream=stream,
        include_usage=bool(options.get("include_usage")),
        conversation_id=named if named is not None else metadata.get("conversation_id"),
        image=new_message_image(trailing),
        offered=_tools(data),
    )


def completion_id(message_id: int) -> str:
    return f"chatcmpl-{message_id}"


def finish_reason(outcome: Outcome) -> str:
    if stored_calls(outcome.reply):
        return "tool_calls"
    return "length" if outcome.cut_at_length else "stop"


def wire_calls(outcome: Outcome, *, indexed: bool = False) -> list[dict[str, Any]]:
    """The reply's tool calls as Chat Completions sends them (``indexed``: stream deltas)."""
    return [
        {
            **({"index": i} if indexed else {}),
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["input"])},
        }
        for i, call in enumerate(stored_calls(outcome.reply))
    ]


def usage(outcome: Outcome) -> dict[str, Any]:
    tokens = outcome.tokens
    return {
        "prompt_tokens": tokens.prompt,
        "completion_tokens": tokens.output,
        "total_tokens": tokens.prompt + tokens.output,
        "prompt_tokens_details": {"cached_tokens": tokens.cache_read},
    }


def completion(outcome: Outcome, model: str, created: int) -> dict[str, Any]:
    """The ``chat.completion`` object of a final reply."""
    reply = outcome.reply
    calls = wire_calls(outcome)
    return {
        "id": completion_id(outcome.message_id),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": (reply.content if reply is not None else "")
                    or (None if calls else ""),
                    "refusal": None,
                    **({"tool_calls": calls} if calls else {}),
                },
                "finish_reason": finish_reason(outcome),
                "logprobs": None,
            }
        ],
        "usage": usage(outcome),
        "system_fingerprint": None,
        EXTENSION_FIELD: outcome.extension(),
    }


def _chunk(
    message_id: int, model: str, created: int, delta: dict[str, Any], finish: str | None
) -> dict[str, Any]:
    return {
        "id": completion_id(message_id),
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def _data(value: Any) -> bytes:
    return f"data: {json.dumps(value, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


async def completion_chunks(
    ack: dict[str, Any],
    items: AsyncGenerator[tuple[str, dict[str, Any]] | None, None],
    *,
    conversation: Conversation,
    model: str,
    include_usage: bool,
    error_body: Any,
) -> AsyncGenerator[bytes, None]:
    """The reply's events (:func:`chats.api.streaming.reply_items`, after its ``ack``) as
    ``chat.completion.chunk`` lines ending in ``data: [DONE]``: the role first, the text
    deltas, the finish reason, then (``include_usage``) the usage. The last chunk carries the
    extension field. A reply that fails ends with an ``error`` line (the SDK raises it);
    ``error_body(status, message, code)`` shapes it."""
    message_id = int(ack["message_id"])
    created = int(time.time())
    try:
        yield _data(_chunk(message_id, model, created, {"role": "assistant", "content": ""}, None))
        async for item in items:
            if item is None:
                yield KEEPALIVE
                continue
            name, event = item
            if name == "reply_state" and event["status"] in (Status.COMPLETE, Status.INCOMPLETE):
                text = event.get("content") or ""
                if text:
                    yield _data(_chunk(message_id, model, created, {"content": text}, None))
            elif name == "delta":
                yield _data(_chunk(message_id, model, created, {"content": event["text"]}, None))
            elif name in ("done", "error"):
                outcome = await db(outcome_of)(conversation, message_id)
                if outcome.failed:
                    text = str(event.get("message") or "The reply failed.")
                    code = str(event.get("code") or "provider_error")
                    yield _data(error_body(502, text, code))
                    return
                calls = wire_calls(outcome, indexed=True)
                if calls:
                    yield _data(_chunk(message_id, model, created, {"tool_calls": calls}, None))
                last = _chunk(message_id, model, created, {}, finish_reason(outcome))
                if include_usage:
                    yield _data(last)
                    last = {**_chunk(message_id, model, created, {}, None), "choices": []}
                    last["usage"] = usage(outcome)
                last[EXTENSION_FIELD] = outcome.extension()
                yield _data(last)
                yield DONE
                return
    finally:
        await items.aclose()
