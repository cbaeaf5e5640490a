"""Writes of the chats app. Views, consumers, API views and tasks call these."""

from .conversations import conversation_create, participant_add
from .messages import (
    MessageRejected,
    max_message_chars,
    message_create,
    validate_message_content,
)

__all__ = [
    "MessageRejected",
    "conversation_create",
    "max_message_chars",
    "message_create",
    "participant_add",
    "validate_message_content",
]
