"""ChatRequest -> Messages API parameters, with the prompt-cache breakpoints placed.

Anthropic caches the prompt prefix in the order tools -> system -> messages, up to a block
marked ``cache_control: {"type": "ephemeral"}`` (at most four per request). We mark the last
*stable* system block (which also caches every tool definition before it), or, without a
stable system part, the last tool definition; then the message blocks the request names
(the end of the history and the new message), so the next turn, which appends to the
history, reads this turn's prefix from the cache. What only this turn sends (its tail) comes
after the last breakpoint, so it never invalidates the cache.
"""

from __future__ import annotations

from typing import Any

from .base import (
    ChatRequest,
    CompactionPart,
    ContentPart,
    ImagePart,
    RequestMessage,
    TextPart,
    ToolUsePart,
)
from .prompt_cache import MAX_BREAKPOINTS

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def _mark(ttl: str) -> dict[str, str]:
    """A breakpoint; the 5-minute lifetime is the API's default and is left implicit."""
    return EPHEMERAL if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def build_params(request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` (without ``stream`` and ``timeout``)."""
    mark = _mark(request.cache_ttl)
    stable = request.stable_system_blocks()
    left = MAX_BREAKPOINTS - 1
    marks = set(request.cache_breakpoints[-left:] if left else ())
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [_message(m, i, marks, mark) for i, m in enumerate(request.messages)],
    }
    system = [
        {"type": "text", "text": text, **({"cache_control": mark} if i == stable - 1 else {})}
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
            tools[-1]["cache_control"] = mark
        params["tools"] = tools
        params["tool_choice"] = (
            {"type": "tool", "name": request.tool_name}
            if request.tool_name
            else {"type": request.tool_choice}
        )
    management = request.context_management
    if management:
        # The provider's own context management (beta): the edits and the headers they need.
        params["context_management"] = {"edits": management.edits()}
        params["betas"] = management.betas()
    # No `temperature`: this SDK's Messages API has no sampling parameters any more.
    return params


def _message(
    message: RequestMessage, index: int, marks: set[tuple[int, int]], mark: dict[str, str]
) -> dict[str, Any]:
    if isinstance(message.content, str):
        if (index, 0) in marks:
            block = {"type": "text", "text": message.content, "cache_control": mark}
            return {"role": message.role, "content": [block]}
        return {"role": message.role, "content": message.content}
    parts = [_part(p) for p in message.content]
    for k, part in enumerate(parts):
        if (index, k) in marks:
            part["cache_control"] = mark
    return {"role": message.role, "content": parts}


def _part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, CompactionPart):
        return part.as_block()
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
