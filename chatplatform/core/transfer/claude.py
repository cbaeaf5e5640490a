"""Claude's export (``conversations.json``, alone or in the zip Claude sends): a list of
conversations (``uuid``, ``name``, ``created_at``, ``updated_at``, ``chat_messages``), each
message with its ``uuid``, ``sender`` (``human`` or ``assistant``), ``created_at`` and its
text: the ``text`` blocks of ``content`` (joined), else its ``text`` field. Other blocks
(thinking, images) are left out, and so is a message with no text left; attached files are not
imported. The platform's own JSON export has this shape.

A tool round of an application's tools is read from the blocks the platform's export writes
for it: an assistant message's ``tool_use`` blocks (``id``, ``name``, ``input``) are its calls
(kept with no text too), and a human message of ``tool_result`` blocks (``tool_use_id``,
``content``, ``is_error``) is the message of their results, in the round of the earlier reply
whose call its first result answers; they must answer each call of that reply exactly once,
and a round is answered once (else the file is refused, as the SDK-compatible API refuses
such results). A human message with text beside its results gives a
second message, after the results. Tool blocks of Claude's own tools (a ``tool_use`` without
an id, or an assistant message that holds its tools' results too: they ran at Claude) are
left out."""

from __future__ import annotations

from typing import Any

from chatplatform.core.llm.tool_rounds import answers_exactly
from chatplatform.core.transfer.records import (
    ASSISTANT,
    MAX_CALL_ID,
    TOOL,
    USER,
    TransferConversation,
    TransferMessage,
    Where,
    conversations_read,
    iso_time,
    text_id,
    tool_results_text,
)

SERVICE = "Claude"
SENDERS = {"human": USER, "user": USER, "assistant": ASSISTANT}


#: What a call maps to in the reader's rounds once its round has been answered.
ANSWERED = ""


def read_claude(document: Any) -> list[TransferConversation]:
    """The conversations of a Claude export's parsed JSON (see :func:`conversations_read`)."""
    return conversations_read(document, SERVICE, _conversation)


def _conversation(item: Any, where: Where) -> TransferConversation:
    source = text_id(where.field(item, "uuid", (str, int)), where, "'uuid'")
    chat = where.field(item, "chat_messages", (list,))
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise where.error("field 'name' is not text")
    rounds: dict[str, str] = {}  # each call read so far -> its round (its reply's first call)
    messages: list[TransferMessage] = []
    for n, entry in enumerate(chat):
        messages += _messages(entry, where, f"message {n + 1}", rounds)
    return TransferConversation(
        source_id=source,
        title=(name or "").strip(),
        created_at=iso_time(item.get("created_at"), where, "'created_at'"),
        updated_at=iso_time(item.get("updated_at"), where, "'updated_at'"),
        messages=tuple(messages),
    )


def _messages(
    entry: Any, where: Where, context: str, rounds: dict[str, str]
) -> list[TransferMessage]:
    """The message ``entry`` is (none when it holds no text, two for results with text)."""
    source = text_id(where.field(entry, "uuid", (str, int), context=context), where, context)
    sender = where.field(entry, "sender", (str,), context=context)
    if sender not in SENDERS:
        raise where.error(f"{context}: sender {sender[:40]!r} is neither 'human' nor 'assistant'")
    role = SENDERS[sender]
    created = iso_time(entry.get("created_at"), where, f"{context}: 'created_at'")
    blocks = entry.get("content")
    uses: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    if isinstance(blocks, list) and blocks:
        dicts = [b for b in blocks if isinstance(b, dict)]
        texts = [
            b["text"] for b in dicts if b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        text = "\n\n".join(t for t in texts if t.strip())
        uses = [b for b in dicts if b.get("type") == "tool_use"]
        results = [b for b in dicts if b.get("type") == "tool_result"]
    else:
        plain = entry.get("text")
        if plain is not None and not isinstance(plain, str):
            raise where.error(f"{context}: field 'text' is not text")
        text = plain or ""
    text = text.strip()
    if role == ASSISTANT and not results:
        calls = [_call(b, where, context) for b in uses if "id" in b]
        if calls:
            group = str(calls[0]["id"])
            rounds.update((str(call["id"]), group) for call in calls)
            return [
                TransferMessage(
                    source, ASSISTANT, text, created, tool_calls=tuple(calls), tool_group=group
                )
            ]
    out: list[TransferMessage] = []
    if role == USER and results:
        answered = [_result(b, where, context) for b in results]
        answering = rounds.get(str(answered[0]["tool_use_id"]))
        if answering is None:
            raise where.error(f"{context}: its tool results answer no call of an earlier reply")
        if answering == ANSWERED:
            raise where.error(f"{context}: its tool results answer a reply already answered")
        round_calls = [call for call, group in rounds.items() if group == answering]
        if not answers_exactly(round_calls, [str(r["tool_use_id"]) for r in answered]):
            raise where.error(
                f"{context}: its tool results do not answer each call of that reply exactly once"
            )
        for call_id in round_calls:  # a round is answered once
            rounds[call_id] = ANSWERED
        out.append(
            TransferMessage(
                source,
                TOOL,
                tool_results_text(answered),
                created,
                tool_results=tuple(answered),
                tool_group=answering,
            )
        )
        source = f"{source}:text"  # the text beside the results: a message of its own, after
    if text:
        out.append(TransferMessage(source_id=source, role=role, text=text, created_at=created))
    return out


def _call_id(value: Any, where: Where, context: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_CALL_ID:
        raise where.error(f"{context}: a tool call's id is text of 1 to {MAX_CALL_ID} characters")
    return value


def _call(block: dict[str, Any], where: Where, context: str) -> dict[str, Any]:
    """A ``tool_use`` block as ``Message.tool_calls`` holds a call."""
    name = block.get("name")
    if not isinstance(name, str) or not name.strip():
        raise where.error(f"{context}: a tool call has no tool name")
    arguments = block.get("input")
    return {
        "id": _call_id(block.get("id"), where, context),
        "name": name.strip(),
        "input": arguments if isinstance(arguments, dict) else {},
    }


def _result(block: dict[str, Any], where: Where, context: str) -> dict[str, Any]:
    """A ``tool_result`` block as ``Message.tool_results`` holds a result: its content as
    text (a string, or its text blocks joined)."""
    content = block.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    else:
        raise where.error(f"{context}: a tool result's content is neither text nor blocks")
    return {
        "tool_use_id": _call_id(block.get("tool_use_id"), where, context),
        "content": text,
        "is_error": bool(block.get("is_error")),
    }
