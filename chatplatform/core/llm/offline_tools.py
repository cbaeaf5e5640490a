"""The offline provider and the tools a client offers (the SDK-compatible API): it calls one,
as a model would, when the user's new message names it, and once the results come back it
says what the tool answered. Deterministic, so an application's tool loop can be tried
without a model."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from .base import ChatRequest, ContentPart, ToolCall, ToolResultPart, message_text
from .tools import FACT_TOOLS

#: Characters of the user's message given to a called tool's text arguments.
ARGUMENT_CHARS = 200
#: Characters of a tool's result quoted in the reply.
RESULT_CHARS = 200

_PLATFORM_TOOLS = frozenset(tool.name for tool in FACT_TOOLS)
_DEFAULTS: dict[str, Any] = {"number": 0, "integer": 0, "boolean": False, "array": [], "object": {}}


def client_calls(request: ChatRequest) -> list[ToolCall]:
    """The call of a client's tool answering ``request``: the one it must call
    (``tool_name``, or the first with ``tool_choice="any"``), else the first whose name the
    new user message holds; none after a tool round or with ``tool_choice="none"``."""
    offered = [tool for tool in request.tools if tool.name not in _PLATFORM_TOOLS]
    last = request.messages[-1] if request.messages else None
    if not offered or request.tool_choice == "none" or request.summary_task is not None:
        return []
    if last is None or last.role != "user" or tool_results(last.content):
        return []
    text = message_text(last)
    if request.tool_name:
        chosen = next((t for t in offered if t.name == request.tool_name), None)
    elif request.tool_choice == "any":
        chosen = offered[0]
    else:
        chosen = next(
            (t for t in offered if re.search(rf"\b{re.escape(t.name)}\b", text, re.IGNORECASE)),
            None,
        )
    if chosen is None:
        return []
    said = " ".join(text.split())[:ARGUMENT_CHARS]
    properties = chosen.input_schema.get("properties") or {}
    arguments = {
        name: said
        if spec.get("type", "string") == "string"
        else _DEFAULTS.get(str(spec.get("type")))
        for name, spec in properties.items()
        if isinstance(spec, dict)
    }
    digest = hashlib.sha256(f"{len(request.messages)}:{chosen.name}:{text}".encode()).hexdigest()
    return [ToolCall(f"call_offline_{digest[:24]}", chosen.name, arguments)]


def client_result_lines(results: list[ToolResultPart]) -> list[str]:
    """What the reply after a round of a client's tools says of their results."""
    lines = []
    for result in results:
        said = " ".join(result.content.split())
        if len(said) > RESULT_CHARS:
            said = said[:RESULT_CHARS].rstrip() + "…"
        verb = "failed" if result.is_error else "answered"
        lines.append(f"The tool {verb}: {said}")
    return lines


def tool_results(content: str | Sequence[ContentPart]) -> list[ToolResultPart]:
    """The tool results a message's content holds (none in plain text)."""
    if isinstance(content, str):
        return []
    return [part for part in content if isinstance(part, ToolResultPart)]
