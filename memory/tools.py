"""Executors of the model's memory tools (``chatplatform.core.llm.tools``: ``save_user_fact``,
which saves a fact or, with ``kind``, a standing instruction or preference, and
``get_user_facts``, which lists them all with their kind).

Who the facts belong to comes from the turn (``tenant_id``, ``user_id``), never from the
model's input, so a model cannot read or write another user's or tenant's facts. In a turn
of a conversation others read (``memory.selectors.conversation_is_shared``),
``get_user_facts`` lists only the user's shareable facts, as the prompt holds only those. Inputs are
checked against the tools' schemas (unknown properties, wrong types and lengths are rejected).
Results are JSON-able dicts: ``{"ok": true, ...}`` or ``{"ok": false, "error": code,
"message": ...}``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async

from chatplatform.core.llm.base import ToolCall
from chatplatform.core.llm.tools import GET_USER_FACTS, SAVE_USER_FACT
from chatplatform.db import connections_released
from chatplatform.policies import active_policy
from memory.models import FactSource
from memory.selectors import current_facts, message_is_shared
from memory.services import FactRejected, fact_save_detailed

logger = logging.getLogger(__name__)

TOOL_NAMES = (SAVE_USER_FACT.name, GET_USER_FACTS.name)
_SAVE_PROPERTIES = SAVE_USER_FACT.input_schema["properties"]


class ToolFailed(Exception):
    """Raised by the async executor for an ``ok: false`` result, so the tool loop reports it
    to the model as an error result."""


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": code, "message": message}


def _check_input(name: str, data: Any) -> dict[str, Any] | None:
    """An error result when ``data`` does not match the tool's schema."""
    if not isinstance(data, dict):
        return _error("invalid_input", "The input must be a JSON object.")
    allowed = set(_SAVE_PROPERTIES) if name == SAVE_USER_FACT.name else set()
    extra = sorted(set(data) - allowed)
    if extra:
        return _error("invalid_input", f"Unknown input properties: {', '.join(extra)}.")
    if name == SAVE_USER_FACT.name:
        text, key = data.get("text"), data.get("key")
        if not isinstance(text, str):
            return _error("invalid_input", "`text` is required and must be a string.")
        if len(text) > _SAVE_PROPERTIES["text"]["maxLength"]:
            return _error("too_large", "`text` is longer than 500 characters.")
        if key is not None and (
            not isinstance(key, str) or len(key) > _SAVE_PROPERTIES["key"]["maxLength"]
        ):
            return _error("invalid_key", "`key` must be a string of at most 64 characters.")
        kinds = _SAVE_PROPERTIES["kind"]["enum"]
        if "kind" in data and data["kind"] not in kinds:
            return _error("invalid_kind", f"`kind` must be one of: {', '.join(kinds)}.")
    return None


def execute_tool(
    name: str,
    input: dict[str, Any],  # noqa: A002 - the tool-call field's name
    *,
    tenant_id: int,
    user_id: int,
    message_id: int | None = None,
) -> dict[str, Any]:
    """Run one fact tool for the user of the turn; return a JSON-able result."""
    if name not in TOOL_NAMES:
        return _error("unknown_tool", f"No tool named {name!r}.")
    problem = _check_input(name, input)
    if problem is not None:
        return problem
    if name == SAVE_USER_FACT.name:
        return _save(input, tenant_id=tenant_id, user_id=user_id, message_id=message_id)
    return _get(tenant_id=tenant_id, user_id=user_id, message_id=message_id)


def _save(
    data: dict[str, Any], *, tenant_id: int, user_id: int, message_id: int | None
) -> dict[str, Any]:
    try:
        saved = fact_save_detailed(
            tenant_id,
            user_id,
            data["text"],
            key=data.get("key"),
            source=FactSource.TOOL,
            source_message=message_id,
            kind=data.get("kind", _SAVE_PROPERTIES["kind"]["default"]),
        )
    except FactRejected as rejected:
        return _error(rejected.code, rejected.message)
    fact = saved.fact
    result: dict[str, Any] = {
        "ok": True,
        "saved": saved.created,
        "fact": {"id": fact.pk, "kind": fact.kind, "text": fact.text, "key": fact.key},
    }
    if saved.replaced is not None:
        result["replaced"] = {"id": saved.replaced.pk, "text": saved.replaced.text}
    if saved.evicted:
        result["evicted"] = len(saved.evicted)
    return result


def _get(*, tenant_id: int, user_id: int, message_id: int | None) -> dict[str, Any]:
    try:
        limit = active_policy(tenant_id).max_facts_per_user
    except Exception:  # no policy at all: still answer with the facts there are
        limit = 100
    shared = message_id is not None and message_is_shared(tenant_id, message_id)
    facts = current_facts(tenant_id, user_id, limit=limit, shareable_only=shared)
    return {
        "ok": True,
        "count": len(facts),
        "facts": [
            {
                "id": f.pk,
                "kind": f.kind,
                "text": f.text,
                "key": f.key,
                "shareable": f.shareable,
                "saved_at": f.created_at.isoformat() if f.created_at else None,
            }
            for f in facts
        ],
    }


def tool_executor(
    *, tenant_id: int, user_id: int, message_id: int | None = None
) -> Callable[[ToolCall], Awaitable[str]]:
    """An executor for ``chatplatform.core.llm.stream_with_tools``: runs the fact tools for this
    turn's user (ORM work in a thread) and returns the JSON result text."""

    run = sync_to_async(connections_released(execute_tool), thread_sensitive=True)

    async def execute(call: ToolCall) -> str:
        result = await run(
            call.name, call.input, tenant_id=tenant_id, user_id=user_id, message_id=message_id
        )
        if not result.get("ok"):
            raise ToolFailed(json.dumps(result))
        return json.dumps(result, ensure_ascii=False)

    return execute
