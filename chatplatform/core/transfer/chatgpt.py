"""ChatGPT's export (``conversations.json``, alone or in the zip ChatGPT sends): a list of
conversations, each a tree of messages (``mapping``: node id -> ``{id, parent, children,
message}``) whose ``current_node`` is the last message of the branch the user last saw.

What is read, and what is left out:

- only the current branch: the path from ``current_node`` up through the parents to the root,
  so earlier attempts of a regenerated reply and the versions of an edited message (the
  other branches of the tree) are left out;
- only the user's and the assistant's messages that ChatGPT showed: system and tool messages,
  hidden ones (``metadata.is_visually_hidden_from_conversation``, such as the custom
  instructions), and assistant messages addressed to a tool (``recipient`` other than
  ``all``: code to run, searches) are left out;
- text content (``text`` and ``multimodal_text``): the string parts are the message; every
  other part (an image, a file, audio) becomes a short placeholder in brackets, such as
  ``[image not imported]``. Other content types (code sent to a tool, its output, browsing
  quotes, the model's thoughts) are left out. A message with no text left is left out.
"""

from __future__ import annotations

from typing import Any

from chatplatform.core.transfer.records import (
    ASSISTANT,
    USER,
    TransferConversation,
    TransferMessage,
    Where,
    conversations_read,
    epoch_time,
    text_id,
)

SERVICE = "ChatGPT"
#: Content types whose parts are the message's text.
TEXT_TYPES = frozenset({"text", "multimodal_text"})
#: Placeholders of the parts that are not text, by their ``content_type``.
PART_PLACEHOLDERS = {
    "image_asset_pointer": "[image not imported]",
    "audio_asset_pointer": "[audio not imported]",
    "audio_transcription": "",  # the transcript is also a text part
    "real_time_user_audio_video_asset_pointer": "[audio not imported]",
}
OTHER_PART = "[attachment not imported]"


def read_chatgpt(document: Any) -> list[TransferConversation]:
    """The conversations of a ChatGPT export's parsed JSON (see :func:`conversations_read`)."""
    return conversations_read(document, SERVICE, _conversation)


def _conversation(item: Any, where: Where) -> TransferConversation:
    mapping = where.field(item, "mapping", (dict,))
    title = item.get("title")
    if title is not None and not isinstance(title, str):
        raise where.error("field 'title' is not text")
    current = item.get("current_node")
    if mapping and not isinstance(current, str):
        raise where.error("has no field 'current_node' naming the message shown last")
    branch = _branch(mapping, current, where) if mapping else []
    source = item.get("conversation_id") or item.get("id") or _root_id(branch, where)
    messages = []
    for node_id, node in branch:
        message = _message(node_id, node, where)
        if message is not None:
            messages.append(message)
    return TransferConversation(
        source_id=text_id(source, where, "the conversation's id"),
        title=(title or "").strip(),
        created_at=epoch_time(item.get("create_time"), where, "'create_time'"),
        updated_at=epoch_time(item.get("update_time"), where, "'update_time'"),
        messages=tuple(messages),
    )


def _branch(mapping: dict[str, Any], current: str, where: Where) -> list[tuple[str, Any]]:
    """The nodes from the root to ``current``, following the parents (a cycle or a parent
    the mapping lacks is an error)."""
    path: list[tuple[str, Any]] = []
    seen: set[str] = set()
    node_id: Any = current
    while node_id is not None:
        if not isinstance(node_id, str):
            raise where.error(f"a message's 'parent' is {type(node_id).__name__}, not an id")
        if node_id in seen:
            raise where.error(f"the messages' parents form a loop at {node_id!r}")
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise where.error(f"'mapping' has no message {node_id!r}")
        path.append((node_id, node))
        node_id = node.get("parent")
    path.reverse()
    return path


def _root_id(branch: list[tuple[str, Any]], where: Where) -> str:
    if not branch:
        raise where.error("has no 'id' and no messages to name it by")
    return f"root-{branch[0][0]}"


def _message(node_id: str, node: dict[str, Any], where: Where) -> TransferMessage | None:
    message = node.get("message")
    if message is None:
        return None  # the tree's root
    context = f"message {node_id!r}"
    author = where.field(message, "author", (dict,), context=context)
    role = author.get("role")
    if role not in (USER, ASSISTANT):
        return None  # system and tool messages
    metadata = message.get("metadata") or {}
    if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        return None
    if role == ASSISTANT and message.get("recipient", "all") != "all":
        return None  # addressed to a tool
    content = where.field(message, "content", (dict,), context=context)
    kind = content.get("content_type")
    if kind not in TEXT_TYPES:
        return None
    parts = content.get("parts") or []
    if not isinstance(parts, list):
        raise where.error(f"{context}: 'content.parts' is not a list")
    text = "\n\n".join(t for t in (_part_text(p) for p in parts) if t.strip()).strip()
    if not text:
        return None
    return TransferMessage(
        source_id=text_id(message.get("id") or node_id, where, f"{context}'s id"),
        role=role,
        text=text,
        created_at=epoch_time(message.get("create_time"), where, f"{context}: 'create_time'"),
    )


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        return PART_PLACEHOLDERS.get(str(part.get("content_type")), OTHER_PART)
    return OTHER_PART
