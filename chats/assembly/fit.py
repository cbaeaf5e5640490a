"""Whether a message being written will fit a conversation's next turn whole, or be cut.

The answer is the assembly's own: the draft is assembled as the next turn's new message (read
only, nothing stored, no retrieval: what retrieval adds is claimed after the new message and
cannot change its room), and the numbers are read from the prompt that would be sent: the
new message's section and, when it does not fit, its truncation record. So the composer's
warning and the turn agree on the counter, the policy's budget, the system prompt's share and
the head-and-tail cut (``chatplatform.core.context.packing``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.utils import timezone

from chatplatform.core.context.types import MessageItem, RetrievedItem
from chatplatform.models.conversations import Conversation
from chats.assembly.service import assemble_context


@dataclass(frozen=True)
class MessageFit:
    """A draft message against the next turn's budget, in the policy's counted tokens.

    ``tokens``: the draft's tokens; ``room``: the most a message may have to be sent whole;
    ``kept``: what is sent (``tokens`` when it fits, else the cut size); ``fits``: sent whole.
    ``exact``: the counter is the model's tokenizer (else the counts are estimates).
    ``policy_limit`` and ``model_window``: the policy's prompt limit and the model's context
    window, so the page can say whether a larger policy limit would hold the message.
    ``beyond_policy``: the message is larger than the policy's room and goes whole because
    the policy sends oversized messages whole and the model's window holds it (``room`` is
    still the policy's own).
    """

    tokens: int
    room: int
    kept: int
    fits: bool
    counter: str
    exact: bool
    policy_limit: int
    model_window: int
    beyond_policy: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _no_retrieval(*_args: Any) -> list[RetrievedItem]:
    return []


def message_fit(conversation: Conversation, *, text: str, author: Any) -> MessageFit:
    """How ``text``, sent next by ``author`` in ``conversation`` (one they take part in),
    would enter the prompt."""
    draft = MessageItem(
        id="draft",
        seq=conversation.last_seq + 1,
        role="user",
        content=text,
        created_at=timezone.now(),
    )
    turn = assemble_context(conversation, draft, author=author, retriever=_no_retrieval)
    prompt = turn.prompt
    section = prompt.section("new_message")
    budget = section.budget if section is not None else 0
    used = section.used if section is not None else 0
    cut = next((t for t in prompt.truncated if t.kind == "new_message"), None)
    if cut is None:
        tokens = turn.counter.count(text)
        kept = tokens
        prefix = used - tokens  # the turn's framing (an author label in group chats)
    else:
        tokens, kept = cut.original_tokens, cut.kept_tokens
        prefix = used - kept - 1  # the cut also spends a token on its marker
    room = budget - prefix
    if prompt.widened_by:
        # The room the policy itself leaves: the raise was made in real tokens.
        room -= int(prompt.widened_by / prompt.margin_ratio)
    return MessageFit(
        tokens=tokens,
        room=max(0, room),
        kept=kept,
        fits=cut is None,
        counter=turn.counter.name,
        exact=turn.counter.exact,
        policy_limit=turn.policy.max_context_tokens,
        model_window=turn.profile.context_window,
        beyond_policy=prompt.widened_by > 0,
    )
