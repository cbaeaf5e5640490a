"""The chats app's models module. The conversation records are defined in the platform layer
(``chatplatform.models.conversations``), which chats, summaries and memory all import; Django
registers them under this app's label when it loads this module."""

from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageEmbedding,
    MessageRevision,
    MessageRole,
    Participant,
    RevisionReason,
    Status,
    TurnRecord,
)

__all__ = [
    "Conversation",
    "Message",
    "MessageEmbedding",
    "MessageRevision",
    "MessageRole",
    "Participant",
    "RevisionReason",
    "Status",
    "TurnRecord",
]
