"""OpenAI Responses on the wire: the ``response`` object and the stream's events exactly as
the ``openai`` SDK parses them (``openai.types.responses``), built from the stored record of
the response (:class:`chatplatform.models.conversations.OpenAIResponse`) and its turn's
outcome."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from chatplatform.models.conversations import OpenAIResponse, Status
from chats.api.compat.outcomes import EXTENSION_FIELD, Outcome, outcome_of
from chats.api.compat.tool_use import stored_calls
from chats.replies.db import db

KEEPALIVE = b": keepalive\n\n"
#: What a failed response's ``error`` says when the reply stored no message of its own.
FAILED = "The model provider failed to answer."

Items = AsyncGenerator[tuple[str, dict[str, Any]] | None, None]


def item_id(record: OpenAIResponse) -> str:
    """The id of the response's one output message (stable: derived from the response's)."""
    return "msg_" + record.public_id.removeprefix("resp_")


def status_of(outcome: Outcome) -> str:
    """``in_progress`` while the reply is written, then ``completed``, ``incomplete`` (cut at
    its length limit) or ``failed``."""
    reply = outcome.reply
    if reply is None or reply.status == Status.STREAMING:
        return "in_progress"
    if outcome.failed:
        return "failed"
    return "incomplete" if outcome.cut_at_length else "completed"


def usage(outcome: Outcome) -> dict[str, Any]:
    tokens = outcome.tokens
    return {
        "input_tokens": tokens.prompt,
        "input_tokens_details": {
            "cached_tokens": tokens.cache_read,
            "cache_write_tokens": tokens.cache_write,
        },
        "output_tokens": tokens.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens.prompt + tokens.output,
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def output_message(record: OpenAIResponse, status: str, parts: list[dict[str, Any]]) -> Any:
    return {
        "id": item_id(record),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": parts,
    }


def function_calls(record: OpenAIResponse, outcome: Outcome) -> list[dict[str, Any]]:
    """The reply's calls of the client's tools as ``function_call`` output items (after the
    message: output indexes from 1)."""
    suffix = record.public_id.removeprefix("resp_")
    return [
        {
            "id": f"fc_{suffix}_{index}",
            "type": "function_call",
            "status": "completed",
            "call_id": call["id"],
            "name": call["name"],
            "arguments": json.dumps(call["input"], ensure_ascii=False),
        }
        for index, call in enumerate(stored_calls(outcome.reply), start=1)
    ]


def response_shell(record: OpenAIResponse, status: str) -> dict[str, Any]:
    """The response object without its output, usage and extension (``in_progress`` when a
    stream starts). The model, its reply length and sampling are the tenant policy's: the
    client's knobs are not echoed as if they applied."""
    return {
        "id": record.public_id,
        "object": "response",
        "created_at": int(record.created_at.timestamp()),
        "status": status,
        "background": False,
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
        "instructions": record.instructions or None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "metadata": record.metadata,
        "model": record.model,
        "output": [],
        "parallel_tool_calls": False,
        "previous_response_id": record.previous_response_id or None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": record.stored,
        "temperature": None,
        "text": {"format": {"type": "text"}, "verbosity": None},
        "tool_choice": "none",
        "tools": [],
        "top_logprobs": 0,
        "top_p": None,
        "truncation": "disabled",
        "usage": None,
        "user": None,
    }


def response_object(record: OpenAIResponse, outcome: Outcome) -> dict[str, Any]:
    """The response object of ``record`` as its turn stands, with the extension field."""
    status = status_of(outcome)
    reply = outcome.reply
    text = reply.content if reply is not None else ""
    body = response_shell(record, status)
    item_status = "in_progress" if status == "in_progress" else "completed"
    if status in ("incomplete", "failed"):
        item_status = "incomplete"
    if text or status != "failed":
        body["output"] = [output_message(record, item_status, [output_text(text)])]
        body["output"] += function_calls(record, outcome)
    if status == "failed":
        message = (reply.error_message if reply is not None else "") or FAILED
        body["error"] = {"code": "server_error", "message": message}
    elif status == "incomplete":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    if status != "in_progress" and reply is not None:
        body["completed_at"] = int(reply.updated_at.timestamp())
        body["usage"] = usage(outcome)
    body[EXTENSION_FIELD] = outcome.extension()
    return body


def _error(data: dict[str, Any]) -> dict[str, Any]:
    """An ``error`` event's fields (and the same under ``error``, which the SDK raises)."""
    code = str(data.get("code") or "server_error")
    message = str(data.get("message") or "The stream ended before the reply.")
    fields = {"code": code, "message": message, "param": None}
    return {**fields, "error": {"type": "server_error", **fields}}


class _Events:
    """The stream's events, numbered (``sequence_number``) in the order they are sent."""

    def __init__(self) -> None:
        self.number = 0

    def __call__(self, name: str, data: dict[str, Any]) -> bytes:
        payload = {"type": name, "sequence_number": self.number, **data}
        self.number += 1
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return f"event: {name}\ndata: {text}\n\n".encode()


async def response_events(
    record: OpenAIResponse, ack: dict[str, Any], items: Items
) -> AsyncGenerator[bytes, None]:
    """The reply's events (:func:`chats.api.streaming.reply_items`, after its ``ack``) in the
    Responses API's order: ``response.created``, ``response.in_progress``,
    ``response.output_item.added``, ``response.content_part.added``, the
    ``response.output_text.delta``s, ``response.output_text.done``,
    ``response.content_part.done``, ``response.output_item.done``, then
    ``response.completed`` or ``response.incomplete`` (cut at length), each response carrying
    the extension field at the end. A reply that fails ends with ``response.failed``, the
    response's ``error`` saying why; a stream that ends before its reply does (it goes on
    and is stored: fetch the response later) ends with an ``error`` event."""
    user_message_id = int(ack["message_id"])
    event = _Events()
    where = {"item_id": item_id(record), "output_index": 0, "content_index": 0}
    shell = response_shell(record, "in_progress")
    try:
        yield event("response.created", {"response": shell})
        yield event("response.in_progress", {"response": shell})
        added = output_message(record, "in_progress", [])
        yield event("response.output_item.added", {"output_index": 0, "item": added})
        yield event("response.content_part.added", {**where, "part": output_text("")})
        async for item in items:
            if item is None:
                yield KEEPALIVE
                continue
            name, data = item
            delta = ""
            if name == "reply_state" and data["status"] in (Status.COMPLETE, Status.INCOMPLETE):
                delta = data.get("content") or ""
            elif name == "delta":
                delta = data["text"]
            if delta:
                yield event("response.output_text.delta", {**where, "delta": delta, "logprobs": []})
            if name not in ("done", "error"):
                continue
            outcome = await db(outcome_of)(record.conversation, user_message_id)
            final = response_object(record, outcome)
            if final["status"] == "failed":
                yield event("response.failed", {"response": final})
                return
            if final["status"] == "in_progress":  # the stream ended, the reply goes on
                yield event("error", _error(data))
                return
            text = outcome.reply.content if outcome.reply is not None else ""
            part = output_text(text)
            yield event("response.output_text.done", {**where, "text": text, "logprobs": []})
            yield event("response.content_part.done", {**where, "part": part})
            yield event(
                "response.output_item.done", {"output_index": 0, "item": final["output"][0]}
            )
            for index, call in enumerate(final["output"][1:], start=1):
                at = {"item_id": call["id"], "output_index": index}
                added = {**call, "status": "in_progress", "arguments": ""}
                yield event("response.output_item.added", {"output_index": index, "item": added})
                arguments = call["arguments"]
                yield event("response.function_call_arguments.delta", {**at, "delta": arguments})
                yield event(
                    "response.function_call_arguments.done",
                    {**at, "name": call["name"], "arguments": arguments},
                )
                yield event("response.output_item.done", {"output_index": index, "item": call})
            ending = (
                "response.incomplete" if final["status"] == "incomplete" else "response.completed"
            )
            yield event(ending, {"response": final})
            return
    finally:
        await items.aclose()
