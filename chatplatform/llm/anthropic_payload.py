"""ChatRequest -> Messages API parameters, with the prompt-cache breakpoint placed.

Anthropic caches the prompt prefix in the order tools -> system -> messages, up to a block
marked ``cache_control: {"type": "ephemeral"}``. We mark the last *stable* block: the last of
the request's ``cache_prefix`` system blocks (which also caches every tool definition before
it), or, without a stable system part, the last tool definition. Per-turn content (recent
messages, retrieved turns) comes after the breakpoint, so it never invalidates the cache.
"""

from __future__ import annotations

from typing import Any

from .base import ChatRequest, ImagePart, Message, TextPart, ToolResultPart, ToolUsePart

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def build_params(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` (without ``stream`` and ``timeout``)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [_message(m) for m in request.messages],
    }
    stable = request.stable_system_blocks()
    system = [
        {"type": "text", "text": text, **({"cache_control": EPHEMERAL} if i == stable - 1 else {})}
        for i, text in enumerate(request.system_blocks())
    ]
    if system:
        params["system"] = system
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if stable == 0:
            tools[-1]["cache_control"] = EPHEMERAL
        params["tools"] = tools
        params["tool_choice"] = {"type": request.tool_choice}
    # No `temperature`: this SDK's Messages API has no sampling parameters any more.
    return params


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message.content, str):
        return {"role": message.role, "content": message.content}
    return {"role": message.role, "content": [_part(p) for p in message.content]}


def _part(part: TextPart | ImagePart | ToolUsePart | ToolResultPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
        }
    if isinstance(part, ToolUsePart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
    return {
        "type": "tool_result",
        "tool_use_id": part.tool_use_id,
        "content": part.content,
        "is_error": part.is_error,
    }
