"""The providers' own refusal of a request whose tool calls and results are not paired, as
the fakes give it: Anthropic answers 400 when a ``tool_use`` block has no ``tool_result``
(or more than one) at the start of the next user message, or a ``tool_result`` answers no
``tool_use`` of the message before; OpenAI answers 400 when an assistant message's
``tool_calls`` are not each answered by one ``tool`` message after it, or a ``tool`` message
answers no call of the assistant message before its run."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .behaviours import HttpError, invalid_request


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def anthropic_pairing_error(body: dict[str, Any]) -> HttpError | None:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for i, message in enumerate(messages):
        calls = Counter(str(b.get("id")) for b in _blocks(message, "tool_use"))
        if any(n > 1 for n in calls.values()):
            return invalid_request(f"messages.{i}: `tool_use` ids must be unique")
        after = messages[i + 1] if i + 1 < len(messages) else {}
        results = Counter(str(b.get("tool_use_id")) for b in _blocks(after, "tool_result"))
        if calls and set(calls) - set(results):
            missing = ", ".join(sorted(set(calls) - set(results)))
            return invalid_request(
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {missing}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        if results and (set(results) - set(calls) or any(n > 1 for n in results.values())):
            return invalid_request(
                f"messages.{i + 1}: unexpected or repeated `tool_use_id` in `tool_result` "
                "blocks. Each `tool_result` block must answer one `tool_use` block of the "
                "previous message, once."
            )
        content = after.get("content") if results else None
        if isinstance(content, list):
            kinds = [b.get("type") if isinstance(b, dict) else None for b in content]
            if "tool_result" in kinds[sum(results.values()) :]:
                return invalid_request(
                    f"messages.{i + 1}: `tool_result` blocks must come first in the content."
                )
    return None


def openai_pairing_error(body: dict[str, Any]) -> HttpError | None:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    pending: Counter[str] = Counter()  # the calls the current run of tool messages answers
    for i, message in enumerate(messages):
        if message.get("role") == "tool":
            answered = str(message.get("tool_call_id"))
            if pending[answered] != 1:
                return invalid_request(
                    f"Invalid parameter: messages[{i}]: messages with role 'tool' must be a "
                    "response to a preceding message with 'tool_calls'."
                )
            pending[answered] = 0
            continue
        if +pending:
            missing = ", ".join(sorted(+pending))
            return invalid_request(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {missing}"
            )
        calls = Counter(str(c.get("id")) for c in message.get("tool_calls") or [])
        if any(n > 1 for n in calls.values()):
            return invalid_request(f"messages[{i}]: tool call ids must be unique.")
        pending = calls
    if +pending:
        return invalid_request("The last assistant message's 'tool_calls' have no tool messages.")
    return None
