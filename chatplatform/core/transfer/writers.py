"""The platform's exports of conversations: JSON in Claude's export shape (what the importer
reads back with the format ``claude``) and Markdown, one document per conversation.

A tool round goes in the blocks Claude's shape has for it: a reply's calls of the
application's tools as ``tool_use`` blocks (``id``, ``name``, ``input``) after its text, the
message of their results as a ``human`` message of ``tool_result`` blocks (``tool_use_id``,
the tool's ``name``, ``content`` as text blocks, ``is_error``), where the Messages API puts
them. In Markdown, under the reply each call (the tool's name, its id, its input as JSON), and
under "Tool results" each result (which call, whether it failed, its text)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from chatplatform.core.transfer.records import (
    NO_OUTPUT,
    TOOL,
    USER,
    TransferConversation,
    TransferMessage,
)

SENDER_OF_ROLE = {USER: "human", TOOL: "human"}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def _tool_names(conversation: TransferConversation) -> dict[str, str]:
    """Each tool call's id and the name of the tool it called."""
    return {
        str(call["id"]): str(call.get("name") or "")
        for message in conversation.messages
        for call in message.tool_calls
    }


def claude_shape(conversation: TransferConversation) -> dict[str, Any]:
    """One conversation as Claude's export writes it."""
    names = _tool_names(conversation)
    return {
        "uuid": conversation.source_id,
        "name": conversation.title,
        "created_at": _iso(conversation.created_at),
        "updated_at": _iso(conversation.updated_at),
        "chat_messages": [
            {
                "uuid": m.source_id,
                "sender": SENDER_OF_ROLE.get(m.role, m.role),
                "text": "" if m.tool_results else m.text,
                "content": _claude_blocks(m, names),
                "created_at": _iso(m.created_at),
            }
            for m in conversation.messages
        ],
    }


def _claude_blocks(message: TransferMessage, names: dict[str, str]) -> list[dict[str, Any]]:
    """A message's content blocks: a tool message's results; any other message's text, then
    its calls."""
    if message.tool_results:
        return [
            {
                "type": "tool_result",
                "tool_use_id": str(result["tool_use_id"]),
                "name": names.get(str(result["tool_use_id"]), ""),
                "content": [{"type": "text", "text": str(result["content"])}]
                if result["content"]
                else [],
                "is_error": bool(result.get("is_error")),
            }
            for result in message.tool_results
        ]
    blocks: list[dict[str, Any]] = []
    if message.text.strip():
        blocks.append({"type": "text", "text": message.text})
    blocks += [
        {
            "type": "tool_use",
            "id": str(call["id"]),
            "name": str(call.get("name") or ""),
            "input": call.get("input") if isinstance(call.get("input"), dict) else {},
        }
        for call in message.tool_calls
    ]
    return blocks


SPEAKERS = {USER: "User", "assistant": "Assistant", TOOL: "Tool results"}


def markdown_document(conversation: TransferConversation) -> str:
    """One conversation as Markdown: its title, then each message under its speaker and
    time. The messages' own text is kept as written (it may hold Markdown); a reply's tool
    calls follow its text, and a tool message shows each result under the call it answers."""
    names = _tool_names(conversation)
    title = conversation.title or "Untitled conversation"
    lines = [f"# {_one_line(title)}", ""]
    if conversation.created_at:
        lines += [f"Started {conversation.created_at:%Y-%m-%d %H:%M} UTC", ""]
    for message in conversation.messages:
        when = f" · {message.created_at:%Y-%m-%d %H:%M}" if message.created_at else ""
        lines += [f"## {SPEAKERS.get(message.role, message.role)}{when}", ""]
        if message.tool_results:
            lines += _markdown_results(message, names)
            continue
        if message.text.strip():
            lines += [message.text, ""]
        for call in message.tool_calls:
            name = str(call.get("name") or "")
            arguments = json.dumps(call.get("input") or {}, ensure_ascii=False, indent=2)
            lines += [
                f"**Tool call** {_code(name)} (id {_code(str(call['id']))}), input:",
                "",
                *_fenced(arguments, "json"),
                "",
            ]
    return "\n".join(lines)


def _markdown_results(message: TransferMessage, names: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for result in message.tool_results:
        call = str(result["tool_use_id"])
        name = names.get(call)
        what = "**Error** from" if result.get("is_error") else "**Result** of"
        tool = f"{_code(name)} (id {_code(call)})" if name else f"the call {_code(call)}"
        text = str(result["content"])
        body = _fenced(text) if text else [f"_{NO_OUTPUT}_"]
        lines += [f"{what} {tool}:", "", *body, ""]
    return lines


def _fenced(text: str, info: str = "") -> list[str]:
    """``text`` as a fenced code block, its fence longer than any run of backticks in it."""
    fence = "`" * max(3, _longest_backticks(text) + 1)
    return [fence + info, text, fence]


def _code(text: str) -> str:
    """``text`` as inline code, its backticks longer than any run of them in it."""
    ticks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def markdown_name(conversation: TransferConversation, index: int) -> str:
    """A file name for the conversation's document, unique in an archive by ``index``."""
    slug = re.sub(r"[^a-z0-9]+", "-", conversation.title.lower()).strip("-")[:60]
    return f"{index:04d}-{slug or 'conversation'}.md"


def _one_line(text: str) -> str:
    return " ".join(text.split())
