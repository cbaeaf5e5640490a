"""The Django side of context assembly: bounded selectors feeding the pure core in
``chatplatform.core.context``, the policy mapping, and the per-turn record."""

from .records import turn_record_create
from .service import TurnContext, assemble_context, assemble_turn

__all__ = [
    "TurnContext",
    "assemble_context",
    "assemble_turn",
    "turn_record_create",
]
