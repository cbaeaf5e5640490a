"""The fake Anthropic server's context management: server compaction and context editing,
as the Messages API documents them (beta; field names from the SDK's ``types.beta``).

- A request's ``messages`` may hold a ``compaction`` block: like the API, everything before
  the newest one is dropped before the prompt is counted.
- ``compact_20260112``: when the input (counted with the fakes' tokenizer) passes the edit's
  ``trigger`` (150,000 input tokens by default), the reply starts with a ``compaction`` block
  that summarises the earlier part (the first words of each message), streamed as
  ``content_block_start`` (content null) + one ``compaction_delta`` (content and
  ``encrypted_content``) + ``content_block_stop``; the reply is then answered from the
  compacted context. ``usage.iterations`` reports the compaction's own sampling (a
  ``compaction`` entry, outside the top-level usage) and the reply's (a ``message`` entry).
- ``clear_tool_uses_20250919`` / ``clear_thinking_20251015``: past their trigger, the oldest tool
  uses (beyond ``keep``) or thinking blocks are cleared; ``message_delta.context_management``
  reports the ``applied_edits``.
- A request using an edit without its beta header is refused (400), as the API does.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from .behaviours import fake_token_count

COMPACT = "compact_20260112"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
BETA_OF = {
    COMPACT: "compact-2026-01-12",
    CLEAR_TOOL_USES: "context-management-2025-06-27",
    CLEAR_THINKING: "context-management-2025-06-27",
}
DEFAULT_COMPACT_TRIGGER = 150_000
DEFAULT_CLEAR_TRIGGER = 100_000
DEFAULT_KEEP_TOOL_USES = 3
#: Words of each message the fake's compaction keeps.
SUMMARY_WORDS = 8
CLEARED = "[cleared to save context]"
_ids = itertools.count(1)


@dataclass
class ContextOutcome:
    """What the fake's context management made of a request: the body it answers from, the
    compaction block (if it compacted) with its usage, and the edits it applied."""

    body: dict[str, Any]
    compaction: dict[str, Any] | None = None
    compaction_usage: dict[str, Any] = field(default_factory=dict)
    applied_edits: list[dict[str, Any]] = field(default_factory=list)


def missing_beta(body: dict[str, Any], headers: dict[str, str]) -> str | None:
    """The beta header an edit of the request needs and lacks (None: nothing missing)."""
    sent = {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}
    for edit in (body.get("context_management") or {}).get("edits", []):
        beta = BETA_OF.get(edit.get("type"))
        if beta is None:
            return f"unknown context management edit {edit.get('type')!r}"
        if beta not in sent:
            return f"context management edit {edit['type']} requires the beta header {beta}"
    return None


def input_tokens(body: dict[str, Any]) -> int:
    """The request's input tokens with the fakes' tokenizer (every block, as JSON but text)."""
    from .anthropic_fake import prompt_segments  # the module that serves the requests

    return sum(s.tokens for s in prompt_segments(body))


def context_outcome(body: dict[str, Any]) -> ContextOutcome:
    """Apply what the request asks: drop what precedes a compaction block, clear, compact."""
    body = _after_compaction(body)
    edits = {e.get("type"): e for e in (body.get("context_management") or {}).get("edits", [])}
    outcome = ContextOutcome(body)
    for kind in (CLEAR_THINKING, CLEAR_TOOL_USES):
        if kind in edits:
            _clear(outcome, kind, edits[kind])
    if COMPACT in edits:
        _compact(outcome, edits[COMPACT])
    return outcome


def _after_compaction(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages", [])
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content")
        if isinstance(content, list):
            kinds = [b.get("type") for b in content]
            if "compaction" in kinds:
                k = len(kinds) - 1 - kinds[::-1].index("compaction")
                kept = {**messages[i], "content": content[k:]}
                return {**body, "messages": [kept, *messages[i + 1 :]]}
    return body


def _trigger(edit: dict[str, Any], default: int) -> int:
    trigger = edit.get("trigger") or {}
    return int(trigger.get("value", default))


def _clear(outcome: ContextOutcome, kind: str, edit: dict[str, Any]) -> None:
    if kind == CLEAR_TOOL_USES and input_tokens(outcome.body) <= _trigger(
        edit, DEFAULT_CLEAR_TRIGGER
    ):
        return
    body = copy.deepcopy(outcome.body)
    wanted = "tool_use" if kind == CLEAR_TOOL_USES else "thinking"
    blocks = [
        b
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == wanted
    ]
    keep = int((edit.get("keep") or {}).get("value", DEFAULT_KEEP_TOOL_USES))
    old = blocks[: max(0, len(blocks) - keep)]
    if not old:
        return
    before = input_tokens(body)
    ids = {b.get("id") for b in old}
    for block in old:
        if wanted == "tool_use":
            block["input"] = {}
        else:
            block["thinking"] = ""
    for m in body.get("messages", []):
        for b in m["content"] if isinstance(m.get("content"), list) else ():
            if b.get("type") == "tool_result" and b.get("tool_use_id") in ids:
                b["content"] = CLEARED
    cleared = before - input_tokens(body)
    count_field = "cleared_tool_uses" if wanted == "tool_use" else "cleared_thinking_turns"
    outcome.applied_edits.append(
        {"type": kind, count_field: len(old), "cleared_input_tokens": max(0, cleared)}
    )
    outcome.body = body


def _compact(outcome: ContextOutcome, edit: dict[str, Any]) -> None:
    tokens = input_tokens(outcome.body)
    if tokens <= _trigger(edit, DEFAULT_COMPACT_TRIGGER):
        return
    messages = outcome.body.get("messages", [])
    lines = [_gist(m) for m in messages]
    content = "Summary of the conversation so far:\n" + "\n".join(line for line in lines if line)
    n = next(_ids)
    block = {"type": "compaction", "content": content, "encrypted_content": f"enc-fake-{n}"}
    outcome.compaction = block
    outcome.compaction_usage = {
        "type": "compaction",
        "input_tokens": tokens,
        "output_tokens": fake_token_count(content),
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    # The reply is answered from the compacted context: the block, then the newest turn.
    newest = messages[-1:] if messages and messages[-1].get("role") == "user" else []
    outcome.body = {
        **outcome.body,
        "messages": [{"role": "assistant", "content": [block]}, *newest],
    }


def _gist(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        text = content
    else:
        text = " ".join(
            b.get("text") or b.get("content") or ""
            if isinstance(b.get("text") or b.get("content") or "", str)
            else json.dumps(b.get("content"))
            for b in content or []
        )
    words = text.split()[:SUMMARY_WORDS]
    return f"- {message.get('role')}: {' '.join(words)}" if words else ""


def iterations(outcome: ContextOutcome, reply_usage: dict[str, int]) -> list[dict[str, Any]]:
    """``usage.iterations`` of a reply: the compaction's own sampling, then the reply's."""
    if outcome.compaction is None:
        return []
    message = {"type": "message", **{k: v for k, v in reply_usage.items() if k != "type"}}
    return [outcome.compaction_usage, message]


def compaction_events(outcome: ContextOutcome) -> list[tuple[dict[str, Any], str]]:
    """The stream events of the compaction block (index 0), before the reply's own blocks."""
    if outcome.compaction is None:
        return []
    block = outcome.compaction
    start = {"type": "compaction", "content": None}
    delta = {
        "type": "compaction_delta",
        "content": block["content"],
        "encrypted_content": block["encrypted_content"],
    }
    return [
        (
            {"type": "content_block_start", "index": 0, "content_block": start},
            "content_block_start",
        ),
        ({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"),
        ({"type": "content_block_stop", "index": 0}, "content_block_stop"),
    ]
