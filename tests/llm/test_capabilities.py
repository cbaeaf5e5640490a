"""A model's capabilities as the Models API reports them: only what is reported supported counts."""

from __future__ import annotations

from chatplatform.core.llm.capabilities import COMPACTION, supports, supports_context_strategy

REPORTED = {
    "image_input": {"supported": True},
    "thinking": {"supported": False, "types": {}},
    "context_management": {
        "supported": True,
        "compact_20260112": {"supported": True},
        "clear_tool_uses_20250919": {"supported": False},
    },
}


def test_a_reported_strategy_is_supported_and_others_are_not() -> None:
    assert supports_context_strategy(REPORTED, COMPACTION)
    assert not supports_context_strategy(REPORTED, "clear_tool_uses_20250919")
    assert not supports_context_strategy(REPORTED, "clear_thinking_20251015")


def test_unknown_capabilities_support_nothing() -> None:
    assert not supports_context_strategy({}, COMPACTION)
    assert not supports_context_strategy(None, COMPACTION)
    off = {"context_management": {"supported": False, "compact_20260112": {"supported": True}}}
    assert not supports_context_strategy(off, COMPACTION)
    assert supports(REPORTED, "image_input")
    assert not supports(REPORTED, "thinking")
    assert not supports({}, "image_input")
