"""Helpers shared by the summaries, memory and jobs tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import F

from chatplatform.core.llm.base import ChatRequest, Done, Provider, StreamEvent, TextDelta, Usage
from chatplatform.core.tokens import get_counter
from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Conversation, Message, TurnRecord
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from memory.models import UserFact
from summaries.models import Summary, TokenBackfillState
from tests import factories

COUNTER = "o200k_base"  # the offline profile's tokenizer

TOPICS = [
    "We agreed to move the launch of the Lisbon office to March 14, 2025.",
    "Maria will send the signed contract with the €12,000 budget by Friday.",
    "The database migration to PostgreSQL 15 took 42 minutes on the staging server.",
    "Oleksandr found that the latency spike came from the cache warming job at 03:00.",
    "The client prefers weekly reports in PDF, sent every Monday morning.",
    "Could you check whether the invoice INV-2291 was paid?",
    "The team decided to keep the old API until version 3.2 is released.",
    "Kyiv and Porto teams will meet in Berlin on 2025-05-20 for the planning week.",
]


#: The summaries tests' policy: rolling summaries on the offline model, small enough that a
#: few dozen messages need summarising; the whole window is sent (trimming has its own tests).
SUMMARY_POLICY: dict[str, Any] = {
    "strategy": "rolling_summary",
    "max_context_tokens": 8000,
    "reserved_response_tokens": 500,
    "system_budget": 400,
    "facts_budget": 300,
    "summaries_budget": 1500,
    "retrieval_budget": 800,
    "min_recent_messages": 4,
    "raw_history_limit": 6,
    "summary_interval": 10,
    "max_summaries_in_context": 3,
    "summary_max_tokens": 200,
    "history_trim_percent": 100,
}


def make_policy(tenant: Any, **overrides: Any) -> ContextPolicy:
    """A tenant policy with :data:`SUMMARY_POLICY`'s values, made active for the tenant."""
    return factories.make_policy(tenant, activate=True, **{**SUMMARY_POLICY, **overrides})


def message_text(i: int) -> str:
    return f"{TOPICS[i % len(TOPICS)]} Note {i}: item {i} is on track."


def add_messages(
    conversation: Conversation,
    n: int,
    *,
    user: Any = None,
    texts: Iterable[str] | None = None,
    created_at: datetime | Sequence[datetime] | None = None,
    counted: bool = True,
    counter_name: str = COUNTER,
) -> list[Message]:
    """Append ``n`` messages (user/assistant alternating) with bulk inserts, keeping
    ``last_seq``, ``message_count`` and ``history_tokens`` as ``message_create`` would."""
    counter = get_counter(counter_name)
    contents = list(texts) if texts is not None else None
    with tenant_scope(conversation.tenant_id):
        fresh = Conversation.objects.get(pk=conversation.pk)
        start = fresh.last_seq
        rows = []
        tokens_total = 0
        for i in range(n):
            content = contents[i] if contents is not None else message_text(start + i)
            role = "user" if (start + i) % 2 == 0 else "assistant"
            count = counter.count(content) if counted else None
            if count is not None:
                tokens_total += count + counter.message_overhead
            rows.append(
                Message(
                    tenant_id=conversation.tenant_id,
                    conversation_id=conversation.pk,
                    seq=start + i + 1,
                    role=role,
                    content=content,
                    author=user if role == "user" else None,
                    token_count=count,
                    token_counter=counter.name if counted else "",
                )
            )
        created = Message.objects.bulk_create(rows)
        Conversation.objects.filter(pk=conversation.pk).update(
            last_seq=start + n,
            message_count=F("message_count") + n,
            history_tokens=F("history_tokens") + tokens_total,
        )
        if created_at is not None:
            times = created_at if isinstance(created_at, Sequence) else [created_at] * n
            for message, when in zip(created, times, strict=True):
                Message.objects.filter(pk=message.pk).update(created_at=when)
                message.created_at = when
    conversation.last_seq = start + n
    return created


def summaries_of(conversation: Conversation, **filters: Any) -> list[Summary]:
    with tenant_scope(conversation.tenant_id):
        return list(
            Summary.objects.filter(conversation_id=conversation.pk, **filters).order_by(
                "kind", "first_seq", "level"
            )
        )


def current_rolling(conversation: Conversation) -> list[Summary]:
    return summaries_of(
        conversation, kind="rolling", merged_into__isnull=True, superseded_at__isnull=True
    )


def db_snapshot() -> dict[str, Any]:
    """Everything the jobs may change, to prove a second run changes nothing."""
    with all_tenants():
        return {
            "summaries": sorted(
                Summary.objects.values_list(
                    "pk",
                    "kind",
                    "level",
                    "first_seq",
                    "last_seq",
                    "text",
                    "token_count",
                    "merged_into_id",
                    "superseded_at",
                    "period_start",
                    "period_end",
                )
            ),
            "messages": sorted(Message.objects.values_list("pk", "token_count", "token_counter")),
            "conversations": sorted(
                Conversation.objects.values_list("pk", "history_tokens", "last_seq")
            ),
            "facts": sorted(UserFact.objects.values_list("pk", "text", "superseded_at")),
            "turns": TurnRecord.objects.count(),
            "backfill": sorted(
                TokenBackfillState.objects.values_list("tenant_id", "signature", "verified_upto_id")
            ),
        }


class ScriptedProvider(Provider):
    """A provider object implementing the streaming interface with scripted answers:
    a string (end_turn), ``(text, stop_reason)``, or an exception to raise."""

    name = "scripted"

    def __init__(self, answers: Iterable[Any]) -> None:
        self.answers = list(answers)
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        text, stop = answer if isinstance(answer, tuple) else (answer, "end_turn")
        for piece in (text[i : i + 17] for i in range(0, len(text), 17)):
            yield TextDelta(piece)
        usage = Usage(input_tokens=1000, output_tokens=100)
        yield usage
        yield Done(stop, usage)


def priced_profile(tenant: Any, provider: str = "anthropic") -> ModelProfile:
    with tenant_scope(tenant):
        return ModelProfile.objects.create(
            tenant=tenant,
            name=f"Fake {provider}",
            provider=provider,
            model="claude-fake",
            context_window=200_000,
            max_output_tokens=8_192,
            tokenizer=COUNTER,
            price_input_per_mtok=Decimal("3"),
            price_output_per_mtok=Decimal("15"),
        )
