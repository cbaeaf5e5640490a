"""What the provider's own context management did during a reply, stored with the turn.

Server compaction: the compaction block the provider returned becomes the conversation's
newest compaction summary (summaries app), covering every message the request sent up to the
new user message; its own sampling is billed apart from the reply (the API reports it as a
``compaction`` entry of ``usage.iterations``, outside the top-level usage), so it is priced
here and added to the turn's cost. Context editing: what the provider reports it cleared.
Both are recorded on the turn (``TurnRecord.provider_context``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from chatplatform.core.llm.base import Compaction, ContextEdited
from chatplatform.core.llm.cost_comparison import COST_QUANTUM
from chatplatform.models.conversations import Message, TurnRecord
from chats.services.messages import final_token_count
from summaries.services import ProviderCompaction, compaction_store

if TYPE_CHECKING:
    from chats.replies.turns import PreparedTurn


@dataclass
class ProviderManaged:
    """The provider's context management events of one reply."""

    compaction: Compaction | None = None
    applied_edits: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def take(self, event: Compaction | ContextEdited) -> None:
        if isinstance(event, Compaction):
            self.compaction = event
        else:
            self.applied_edits = event.applied_edits

    def __bool__(self) -> bool:
        return self.compaction is not None or bool(self.applied_edits)

    @property
    def compacted(self) -> bool:
        """Whether the provider compacted: the prompt it reports is then the compacted one,
        no sample for the model's calibration."""
        return self.compaction is not None

    def compaction_cost(self, prepared: PreparedTurn) -> Decimal:
        """What the compaction's own sampling cost, at the turn model's prices."""
        if self.compaction is None:
            return Decimal(0)
        usage = self.compaction.usage
        return prepared.profile.cost_usd(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cache_ttl=prepared.request.cache_ttl,
        ).quantize(COST_QUANTUM)


#: A reply during which the provider managed nothing.
NOTHING_MANAGED = ProviderManaged()


def provider_context_record(prepared: PreparedTurn, managed: ProviderManaged) -> dict[str, Any]:
    """Store the compaction as a summary and what the provider did on the turn's record (in
    the caller's transaction, tenant scope set); returns what was recorded (nothing, without a
    query, when the provider managed nothing)."""
    recorded: dict[str, Any] = {}
    if not managed:
        return recorded
    if managed.applied_edits:
        recorded["applied_edits"] = [dict(e) for e in managed.applied_edits]
    if managed.compaction is not None:
        recorded["compaction"] = _store_compaction(prepared, managed)
    TurnRecord.objects.current().filter(user_message_id=prepared.user_message_id).update(
        provider_context=recorded
    )
    return recorded


def _store_compaction(prepared: PreparedTurn, managed: ProviderManaged) -> dict[str, Any]:
    assert managed.compaction is not None  # the caller checked
    part, usage = managed.compaction.part, managed.compaction.usage
    last_seq = Message.objects.values_list("seq", flat=True).get(pk=prepared.user_message_id)
    report = prepared.request.context_report
    starts = [last_seq]
    if report is not None:
        # The block covers everything the request sent: the compaction it replaces, if any,
        # and the history from its first message.
        starts += [s.first_seq for s in report.summaries if s.kind == "compaction"]
        starts += [report.history[0]] if report.history else []
    tokens, counter = final_token_count(prepared.conversation, part.content or "")
    cost = managed.compaction_cost(prepared)
    summary = compaction_store(
        prepared.conversation,
        ProviderCompaction(
            content=part.content,
            encrypted_content=part.encrypted_content,
            signature=part.signature,
            first_seq=min(starts),
            last_seq=last_seq,
            source_tokens=prepared.estimated_prompt_tokens,
            tokens=tokens,
            counter=counter.name,
            model=prepared.profile.model,
            cost_usd=cost,
            usage=asdict(usage),
        ),
    )
    return {
        "summary_id": summary.pk if summary is not None else None,
        "first_seq": min(starts),
        "last_seq": last_seq,
        "tokens": tokens,
        "usage": asdict(usage),
        "cost_usd": str(cost),
    }
