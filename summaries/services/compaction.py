"""The provider's own compactions, kept as summaries of kind ``compaction``.

With the server-compaction strategy the provider summarises the conversation itself when the
prompt passes the trigger, and returns a compaction block first in its reply. The block covers
every message the request sent up to the new user message (the previous compaction's range
included, which it replaces), so it is stored with that seq range; later turns send it back,
verbatim, followed by the messages after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from summaries.models import Summary, SummaryKind

#: Stored in ``Summary.prompt_version``: the provider's edit, not one of our prompts.
COMPACTION_VERSION = "compact_20260112"
#: The text shown where the provider's compaction failed (content null: a no-op block).
FAILED_TEXT = "(The provider's compaction produced no summary.)"


@dataclass(frozen=True)
class ProviderCompaction:
    """A compaction block as the provider returned it, with what its own sampling cost."""

    content: str | None
    encrypted_content: str | None
    signature: str | None
    first_seq: int
    last_seq: int
    source_tokens: int
    tokens: int
    counter: str
    model: str
    cost_usd: Decimal
    usage: dict[str, int]


def compaction_store(conversation: Conversation, found: ProviderCompaction) -> Summary | None:
    """Store ``found`` as the conversation's newest compaction (None if that range is stored:
    the same reply finished twice)."""
    block: dict[str, Any] = {
        "content": found.content,
        "encrypted_content": found.encrypted_content,
        "signature": found.signature,
    }
    try:
        with transaction.atomic(), tenant_scope(conversation.tenant_id):
            # The new block replaces the previous one (it summarised it too).
            Summary.objects.filter(
                conversation_id=conversation.pk,
                kind=SummaryKind.COMPACTION,
                superseded_at__isnull=True,
                last_seq__lt=found.last_seq,
            ).update(superseded_at=timezone.now())
            return Summary.objects.create(
                tenant_id=conversation.tenant_id,
                conversation_id=conversation.pk,
                kind=SummaryKind.COMPACTION,
                level=0,
                first_seq=found.first_seq,
                last_seq=found.last_seq,
                content={"summary": found.content or "", "block": block, "usage": found.usage},
                text=found.content or FAILED_TEXT,
                token_count=found.tokens,
                token_counter=found.counter,
                source_tokens=found.source_tokens,
                model=found.model[:100],
                prompt_version=COMPACTION_VERSION,
                cost_usd=found.cost_usd,
            )
    except IntegrityError:
        return None
