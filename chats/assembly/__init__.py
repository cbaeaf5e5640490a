"""The Django side of context assembly: bounded selectors feeding the pure core in
``chats.context``, the policy mapping, and the per-turn record."""

from .records import turn_record_create
from .service import TurnContext, assemble_context, assemble_turn, packing_policy_for

__all__ = [
    "TurnContext",
    "assemble_context",
    "assemble_turn",
    "packing_policy_for",
    "turn_record_create",
]
