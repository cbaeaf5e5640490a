"""The provider's own context management (Anthropic's Messages API): what a request asks for
and what a reply reports.

A policy may let the provider manage the context itself, beside or instead of ours:

* **server compaction** (``compact_20260112``, beta ``compact-2026-01-12``): when a request's
  input passes the trigger, the provider summarises the conversation so far into a
  ``compaction`` content block, put first in its reply; later requests send that block (as it
  came: content, encrypted content and signature verbatim) and only the messages after it.
  Its own sampling is billed apart: ``usage.iterations`` holds a ``compaction`` entry whose
  tokens are *not* in the top-level usage.
* **context editing** (beta ``context-management-2025-06-27``): clearing old tool uses
  (``clear_tool_uses_20250919``) and old thinking (``clear_thinking_20251015``) once the input
  passes the trigger; the reply's ``context_management.applied_edits`` says what was cleared.

Field names follow the SDK's types (``anthropic.types.beta``). Pure: no SDK import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .capabilities import CLEAR_THINKING, CLEAR_TOOL_USES, COMPACTION

COMPACTION_BETA = "compact-2026-01-12"
CONTEXT_EDITING_BETA = "context-management-2025-06-27"
#: The lowest input-token trigger the API accepts for compaction (its default is 150,000).
MIN_COMPACTION_TRIGGER = 50_000
#: The trigger sits at this share of the policy's prompt budget, so the provider compacts
#: before our own window would have to restart.
TRIGGER_PERCENT = 80
#: Tool uses kept by ``clear_tool_uses`` (the newest ones), as the API's default.
KEEP_TOOL_USES = 3
#: Assistant turns whose thinking ``clear_thinking`` keeps.
KEEP_THINKING_TURNS = 1

#: Policy choices for context editing -> the edits they send.
EDITING_CHOICES: dict[str, tuple[str, ...]] = {
    "off": (),
    "tool_uses": (CLEAR_TOOL_USES,),
    "thinking": (CLEAR_THINKING,),
    "tool_uses_and_thinking": (CLEAR_TOOL_USES, CLEAR_THINKING),
}


def compaction_trigger(prompt_budget: int) -> int:
    """The input-token trigger for a prompt budget (never below the API's minimum)."""
    return max(MIN_COMPACTION_TRIGGER, prompt_budget * TRIGGER_PERCENT // 100)


def min_budget_for_compaction() -> int:
    """The smallest prompt budget whose trigger (its ``TRIGGER_PERCENT``) reaches the minimum."""
    return -(-MIN_COMPACTION_TRIGGER * 100 // TRIGGER_PERCENT)


@dataclass(frozen=True)
class ContextManagement:
    """What a request asks the provider to manage: compaction past ``compact_trigger`` input
    tokens (``None``: no compaction) and the context edits named in ``clear`` (strategy type
    names), triggered at ``clear_trigger`` input tokens."""

    compact_trigger: int | None = None
    clear: tuple[str, ...] = ()
    clear_trigger: int = MIN_COMPACTION_TRIGGER

    def __bool__(self) -> bool:
        return self.compact_trigger is not None or bool(self.clear)

    def edits(self) -> list[dict[str, Any]]:
        """The ``context_management.edits`` list (thinking edits first, as the API requires)."""
        out: list[dict[str, Any]] = []
        trigger = {"type": "input_tokens", "value": self.clear_trigger}
        if CLEAR_THINKING in self.clear:
            out.append(
                {
                    "type": CLEAR_THINKING,
                    "keep": {"type": "thinking_turns", "value": KEEP_THINKING_TURNS},
                }
            )
        if CLEAR_TOOL_USES in self.clear:
            out.append(
                {
                    "type": CLEAR_TOOL_USES,
                    "trigger": trigger,
                    "keep": {"type": "tool_uses", "value": KEEP_TOOL_USES},
                }
            )
        if self.compact_trigger is not None:
            out.append(
                {
                    "type": COMPACTION,
                    "trigger": {"type": "input_tokens", "value": self.compact_trigger},
                }
            )
        return out

    def betas(self) -> list[str]:
        """The beta headers the edits need."""
        out = [CONTEXT_EDITING_BETA] if self.clear else []
        return [*out, COMPACTION_BETA] if self.compact_trigger is not None else out


@dataclass(frozen=True)
class CompactionPart:
    """A compaction block sent back as the provider returned it (``content`` may be None: a
    failed compaction, which the provider treats as a no-op)."""

    content: str | None
    encrypted_content: str | None = None
    signature: str | None = None

    def as_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "compaction", "content": self.content}
        if self.encrypted_content is not None:
            block["encrypted_content"] = self.encrypted_content
        if self.signature is not None:
            block["signature"] = self.signature
        return block
