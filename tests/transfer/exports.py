"""Exports shaped as ChatGPT and Claude write them, built for the tests: a ChatGPT tree with a
regenerated reply and an edited message (branches the import must leave out), hidden and tool
messages, an image part; a Claude export with text blocks and a tool block."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

T0 = datetime(2024, 3, 5, 9, 30, tzinfo=UTC).timestamp()


def _node(node_id: str, parent: str | None, message: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "children": [], "message": message}


def _msg(
    node_id: str, role: str, parts: list[Any], at: float | None, **extra: Any
) -> dict[str, Any]:
    content_type = extra.pop("content_type", "text")
    metadata = extra.pop("metadata", {})
    return {
        "id": node_id,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": at,
        "update_time": None,
        "content": {"content_type": content_type, "parts": parts},
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": metadata,
        "recipient": extra.pop("recipient", "all"),
        **extra,
    }


def chatgpt_tree(conversation_id: str = "6601d1c2-aaaa-4bbb-8ccc-000000000001") -> dict:
    """A conversation whose tree branches twice: the first reply was regenerated (the
    current branch keeps the second attempt), and the user's second message was edited (the
    current branch keeps the edit). Hidden, system and tool messages sit on the branch."""
    nodes = [
        _node("root", None, None),
        _node("sys", "root", _msg("sys", "system", [""], None)),
        _node(
            "custom",
            "sys",
            _msg(
                "custom",
                "user",
                ["The user wants short answers."],
                T0,
                content_type="user_editable_context",
                metadata={"is_visually_hidden_from_conversation": True},
            ),
        ),
        _node("u1", "custom", _msg("u1", "user", ["Plan a weekend in Lisbon."], T0 + 10)),
        _node("a1-old", "u1", _msg("a1-old", "assistant", ["FIRST ATTEMPT, dropped"], T0 + 20)),
        _node("a1", "u1", _msg("a1", "assistant", ["Day one: Alfama. Day two: Belém."], T0 + 30)),
        _node("u2-old", "a1", _msg("u2-old", "user", ["ORIGINAL WORDING, edited"], T0 + 40)),
        _node("a2-old", "u2-old", _msg("a2-old", "assistant", ["ANSWER TO THE OLD"], T0 + 45)),
        _node(
            "u2",
            "a1",
            _msg(
                "u2",
                "user",
                [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                    "From now on, answer in Portuguese. Where is this?",
                ],
                T0 + 50,
                content_type="multimodal_text",
            ),
        ),
        _node(
            "call",
            "u2",
            _msg(
                "call",
                "assistant",
                ["search('tram 28')"],
                T0 + 55,
                content_type="code",
                recipient="browser",
            ),
        ),
        _node("tool", "call", _msg("tool", "tool", ["results"], T0 + 56)),
        _node("a2", "tool", _msg("a2", "assistant", ["É o elétrico 28."], T0 + 60)),
        _node("empty", "a2", _msg("empty", "assistant", [""], T0 + 61)),
    ]
    mapping = {n["id"]: n for n in nodes}
    for node in nodes:
        if node["parent"]:
            mapping[node["parent"]]["children"].append(node["id"])
    return {
        "title": "Lisbon weekend",
        "create_time": T0,
        "update_time": T0 + 61,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": "empty",
        "id": conversation_id,
        "conversation_id": conversation_id,
    }


def chatgpt_simple(conversation_id: str, title: str, turns: list[tuple[str, str]]) -> dict:
    nodes = [_node("r", None, None)]
    parent = "r"
    for n, (role, text) in enumerate(turns):
        node_id = f"{conversation_id}-{n}"
        nodes.append(_node(node_id, parent, _msg(node_id, role, [text], T0 + 100 * n)))
        parent = node_id
    return {
        "title": title,
        "create_time": T0,
        "update_time": T0 + 100 * len(turns),
        "mapping": {n["id"]: n for n in nodes},
        "current_node": parent,
        "id": conversation_id,
    }


def chatgpt_export(*conversations: dict) -> bytes:
    items = list(conversations) or [chatgpt_tree(), chatgpt_simple("c2", "Tea", TEA)]
    return json.dumps(items).encode()


TEA = [("user", "Which tea has the most caffeine?"), ("assistant", "Matcha, usually.")]


def claude_export() -> bytes:
    return json.dumps(
        [
            {
                "uuid": "1b0c5a1e-0000-4000-8000-0000000000aa",
                "name": "Sourdough",
                "created_at": "2024-06-01T08:00:00.000000Z",
                "updated_at": "2024-06-01T08:05:00.000000Z",
                "account": {"uuid": "acc"},
                "chat_messages": [
                    {
                        "uuid": "m1",
                        "sender": "human",
                        "text": "How long should the levain rest?",
                        "content": [{"type": "text", "text": "How long should the levain rest?"}],
                        "created_at": "2024-06-01T08:00:00.000000Z",
                        "attachments": [],
                        "files": [],
                    },
                    {
                        "uuid": "m2",
                        "sender": "assistant",
                        "text": "",
                        "content": [
                            {"type": "tool_use", "name": "search", "input": {}},
                            {"type": "text", "text": "About 4 to 12 hours,"},
                            {"type": "text", "text": "depending on the kitchen."},
                        ],
                        "created_at": "2024-06-01T08:00:30.000000Z",
                    },
                    {
                        "uuid": "m3",
                        "sender": "human",
                        "text": "Thanks!",
                        "content": [],
                        "created_at": "2024-06-01T08:05:00.000000Z",
                    },
                ],
            }
        ]
    ).encode()
