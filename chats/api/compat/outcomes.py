"""What a turn came to, for the SDK-compatible API: the stored reply, the turn's record (its
tokens as the provider reported them, its context and cost) and the platform's extension
field, read once the reply is final."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chatplatform.models.conversations import Conversation, Message, Status, TurnRecord
from chatplatform.policies import policy_for
from chats.api.selectors import turn_outcome
from chats.api.serializers.context import TurnRecordSerializer

#: The extension field: a top-level member of the response object the SDKs ignore.
EXTENSION_FIELD = "chatplatform"
#: Response headers: the conversation (send it back to continue it by name) and the turn's
#: record (``GET /api/v1/conversations/<c>/messages/<m>/context/`` shows it whole).
CONVERSATION_HEADER = "X-Conversation-Id"
TURN_HEADER = "X-Chatplatform-Turn"
#: One serializer of turn records for the process: DRF builds a ModelSerializer's fields
#: (copies of the declared ones, the model's read) for every serializer made, about 2 ms, ten
#: times what representing a record takes; its fields keep nothing between records.
_TURN_RECORD = TurnRecordSerializer()
#: Error codes of a reply the provider ended at a length limit (``chats.replies.outcomes``).
LENGTH_LIMITS = frozenset({"max_tokens", "model_context_window_exceeded"})
#: An incomplete reply with one of these codes (or none) is an answer, not a failure.
ENDED_ON_PURPOSE = LENGTH_LIMITS | {"stopped", ""}


@dataclass(frozen=True)
class Tokens:
    """A turn's prompt as the provider billed it: ``uncached`` + ``cache_read`` +
    ``cache_write`` make the whole prompt; ``output`` the reply."""

    uncached: int
    cache_read: int
    cache_write: int
    output: int

    @property
    def prompt(self) -> int:
        return self.uncached + self.cache_read + self.cache_write


@dataclass(frozen=True)
class Outcome:
    conversation: Conversation
    message_id: int
    reply: Message | None
    record: TurnRecord | None

    @property
    def failed(self) -> bool:
        """No reply, a failed one, or one the provider broke off (a reply cut at a length
        limit or stopped by its user is an answer)."""
        reply = self.reply
        if reply is None or reply.status not in (Status.COMPLETE, Status.INCOMPLETE):
            return True
        return reply.status == Status.INCOMPLETE and reply.error_code not in ENDED_ON_PURPOSE

    @property
    def cut_at_length(self) -> bool:
        return self.reply is not None and self.reply.error_code in LENGTH_LIMITS

    @property
    def tokens(self) -> Tokens:
        record = self.record
        if record is None:
            return Tokens(0, 0, 0, 0)
        prompt = record.prompt_tokens_reported or record.prompt_tokens_estimated
        cached = record.cache_read_tokens + record.cache_write_tokens
        return Tokens(
            max(prompt - cached, 0),
            record.cache_read_tokens,
            record.cache_write_tokens,
            record.completion_tokens,
        )

    def extension(self) -> dict[str, Any]:
        """The extension field's value: ids, and the turn's record as the REST API gives it
        (sections, what went in and was left out, tokens, cost against the whole history)."""
        return {
            "conversation_id": self.conversation.pk,
            "message_id": self.message_id,
            "reply_id": self.reply.pk if self.reply is not None else None,
            "turn": (
                _TURN_RECORD.to_representation(self.record) if self.record is not None else None
            ),
        }

    def headers(self) -> dict[str, str]:
        headers = {CONVERSATION_HEADER: str(self.conversation.pk)}
        if self.record is not None:
            headers[TURN_HEADER] = str(self.record.pk)
        return headers


def outcome_of(conversation: Conversation, message_id: int) -> Outcome:
    """The turn of the user message ``message_id`` as it stands."""
    reply, record = turn_outcome(conversation, message_id)
    return Outcome(conversation, message_id, reply, record)


def model_name(conversation: Conversation) -> str:
    """The name the SDK reads as the model: the conversation's policy model profile's."""
    return str(policy_for(conversation).model_profile.name)
