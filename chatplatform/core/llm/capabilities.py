"""Reading a model's capabilities as the provider's Models API reports them.

The Messages API's own context management (server-side compaction, clearing old tool uses or
thinking) is offered per model; the Models API lists which strategies a model supports under
``capabilities.context_management``. Profiles store that object as it came (a plain mapping), so
this module is the one place that knows its shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COMPACTION = "compact_20260112"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"


def _supported(entry: Any) -> bool:
    return isinstance(entry, Mapping) and entry.get("supported") is True


def supports_context_strategy(capabilities: Mapping[str, Any] | None, strategy: str) -> bool:
    """Whether the provider reports ``strategy`` (e.g. ``compact_20260112``) as supported.
    Unknown capabilities (an empty mapping) support nothing: the platform never sends an edit a
    model was not reported to accept."""
    management = (capabilities or {}).get("context_management")
    return _supported(management) and _supported(management.get(strategy))  # type: ignore[union-attr]


def supports(capabilities: Mapping[str, Any] | None, name: str) -> bool:
    """Whether a top-level capability (``image_input``, ``thinking``...) is reported supported."""
    return _supported((capabilities or {}).get(name))
