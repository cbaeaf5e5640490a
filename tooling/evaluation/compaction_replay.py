"""The provider's server compaction, simulated for the cost replay (``bench_cost``).

No model runs in the replay, so the provider's compaction is imitated deterministically, the
way the Messages API documents it (``compact_20260112``): when a turn's prompt passes the
trigger, the provider first samples a summary of everything the request holds (billed as its
own iteration: the request's prompt as input, the summary as output, outside the reply's
usage), then answers from the compacted context (system prompt, the compaction block, the new
message). The block is stored like the reply pipeline stores it (a ``compaction`` summary
covering the messages it replaced), so later turns send it, then only the messages after it.

The summary's size is an assumption, since its text is the model's: ``SUMMARY_SHARE`` of the
compacted prompt, at most ``SUMMARY_MAX_TOKENS`` (compactions of long conversations are a few
thousand tokens, whatever the size of what they close). Its text here is the first words of
every covered message, cut to that size, so recall measured on it is a floor, not the model's.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from chatplatform.core.context.formatting import CONVERSATION_START
from chatplatform.core.context.truncate import truncate_tail
from chatplatform.core.llm.anthropic_payload import build_params
from chatplatform.core.llm.base import ChatRequest, CompactionPart, RequestMessage
from chatplatform.core.llm.prompt_cache import PromptCache, anthropic_segments
from chatplatform.core.tokens.bpe import BpeCounter
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from summaries.selectors import latest_compaction
from summaries.services import ProviderCompaction, compaction_store

#: The simulated summary: this share of the compacted prompt, at most this many tokens.
SUMMARY_SHARE = 0.125
SUMMARY_MAX_TOKENS = 2000
#: Output tokens cost this many input tokens (the replay's prices: $15 against $3 a million).
OUTPUT_PRICE_RATIO = 5.0


@dataclass(frozen=True)
class Compacted:
    """What a compacting turn billed (input-token equivalents): the compaction's own
    iteration and the reply's, and the reply's prompt tokens."""

    compaction_billed: float
    reply_billed: float
    prompt_tokens: int
    read: int
    total: int


def compact_turn(
    conversation: Conversation,
    message: Message,
    request: ChatRequest,
    compaction_input_billed: float,
    compaction_input_tokens: int,
    *,
    counter: BpeCounter,
    cache: PromptCache,
    clock: float,
) -> Compacted:
    """Compact at ``message`` (whose request passed the trigger and was priced as the
    compaction's input), store the block, and price the reply from the compacted context."""
    previous = latest_compaction(conversation)
    size = min(SUMMARY_MAX_TOKENS, max(1, int(compaction_input_tokens * SUMMARY_SHARE)))
    covered = _covered_text(
        conversation, previous[0].first_seq if previous else 1, message.seq, size
    )
    text = truncate_tail(covered, size, counter).text
    tokens = counter.count(text)
    compaction_store(
        conversation,
        ProviderCompaction(
            content=text,
            encrypted_content=None,
            signature=None,
            first_seq=previous[0].first_seq if previous else 1,
            last_seq=message.seq,
            source_tokens=compaction_input_tokens,
            tokens=tokens,
            counter=counter.name,
            model=request.model,
            cost_usd=Decimal(0),
            usage={"input_tokens": compaction_input_tokens, "output_tokens": tokens},
        ),
    )
    reply = ChatRequest(
        model=request.model,
        system=request.system,
        cache_prefix=request.cache_prefix,
        cache_breakpoints=((1, 0),),
        messages=[
            RequestMessage("user", CONVERSATION_START),
            RequestMessage("assistant", [CompactionPart(text)]),
            request.messages[-1],
        ],
        max_tokens=request.max_tokens,
    )
    usage = cache.price(anthropic_segments(build_params(reply), counter.count), clock)
    return Compacted(
        compaction_billed=compaction_input_billed + OUTPUT_PRICE_RATIO * tokens,
        reply_billed=usage.billed,
        prompt_tokens=usage.total,
        read=usage.read,
        total=usage.total,
    )


def _covered_text(conversation: Conversation, first_seq: int, last_seq: int, size: int) -> str:
    """The first words of every covered message, about ``size`` tokens in all."""
    with tenant_scope(conversation.tenant_id):
        texts = list(
            Message.objects.filter(
                conversation_id=conversation.pk, seq__gte=first_seq, seq__lte=last_seq
            )
            .order_by("seq")
            .values_list("content", flat=True)
        )
    words = max(3, size * 3 // 4 // max(1, len(texts)))
    return "\n".join("- " + " ".join(text.split()[:words]) for text in texts)
