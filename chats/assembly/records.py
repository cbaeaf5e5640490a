"""The per-turn record: what went into a prompt, what was left out and why, and its usage."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from chatplatform.core.llm.cost_comparison import CostComparison
from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.service import TurnContext
from chats.services.hot_writes.inserts import insert_instance
from chats.token_counts.recount import recount_queue


def breakdown(turn: TurnContext) -> dict[str, Any]:
    """JSON-ready breakdown of an assembled turn (stored, previewed, shown in the meter)."""
    prompt = turn.prompt
    return {
        "strategy": prompt.strategy,
        "counter": prompt.counter_name,
        "budget": prompt.budget,
        "prompt_tokens": prompt.prompt_tokens,
        "margin_ratio": round(prompt.margin_ratio, 4),
        "reserved_response_tokens": turn.policy.reserved_response_tokens,
        "context_window": turn.profile.context_window,
        "hypothetical_tokens": turn.hypothetical_tokens,
        "sections": [
            {"name": s.name, "budget": s.budget, "used": s.used, "items": s.items}
            for s in prompt.sections
        ],
        "included": [[i.kind, i.id, i.tokens] for i in prompt.included],
        "excluded": [[e.kind, e.id, e.tokens, e.reason] for e in prompt.excluded],
        "truncated": [[t.kind, t.id, t.original_tokens, t.kept_tokens] for t in prompt.truncated],
        # Tokens the turn went past the policy's limit to send an oversized message whole.
        "widened_by": prompt.widened_by,
        # Retrieval by meaning: "on", "off", or "unavailable" (asked for, full-text only).
        "dense_retrieval": str(turn.dense),
    }


def turn_record_build(
    *, turn: TurnContext, user_message: Message, assistant_message_id: int | None = None
) -> TurnRecord:
    """The unsaved record of the turn answering ``user_message`` (with its reply's row)."""
    data = breakdown(turn)
    return TurnRecord(
        tenant_id=user_message.tenant_id,
        conversation_id=user_message.conversation_id,
        user_message=user_message,
        user_id=user_message.author_id,
        api_key_id=user_message.api_key_id,
        assistant_message_id=assistant_message_id,
        policy=turn.policy if turn.policy.pk else None,
        model_profile=turn.profile,
        strategy=turn.prompt.strategy,
        counter=turn.prompt.counter_name,
        budget_tokens=turn.prompt.budget,
        sections={
            "sections": data["sections"],
            "truncated": data["truncated"],
            "widened_by": data["widened_by"],
            "margin_ratio": data["margin_ratio"],
            "dense_retrieval": data["dense_retrieval"],
        },
        included=data["included"],
        excluded=data["excluded"],
        prompt_tokens_estimated=turn.prompt.prompt_tokens,
        hypothetical_tokens=turn.hypothetical_tokens,
        assembly_ms=turn.assembly_ms,
    )


def turn_record_create(
    *,
    turn: TurnContext,
    user_message: Message,
    savepoint: bool = True,
    assistant_message_id: int | None = None,
) -> TurnRecord:
    """Store the record of the turn answering ``user_message`` (one current record per
    message: a retry returns the existing one), and queue the messages the assembly had to
    count itself for the token backfill (after commit, deduplicated:
    :mod:`chats.token_counts.recount`).

    ``savepoint=False``: the caller's transaction holds the insert; a record that already
    exists then raises IntegrityError (the caller's transaction must roll back).
    """
    recount_queue(user_message.tenant_id, user_message.conversation_id, turn.prompt.recounted)
    record = turn_record_build(
        turn=turn, user_message=user_message, assistant_message_id=assistant_message_id
    )
    with tenant_scope(user_message.tenant_id):
        try:
            with transaction.atomic(savepoint=savepoint):
                # Every turn writes one: the ORM's insert building costs more than the insert.
                insert_instance(record)
                return record
        except IntegrityError:
            if not savepoint:
                raise
            return TurnRecord.objects.current().get(user_message=user_message)


#: A record the provider billed: it reported usage, or something of the turn was priced.
BILLED = Q(prompt_tokens_reported__isnull=False) | Q(cost_usd__gt=0)


def turn_record_retire(user_message: Message) -> None:
    """Make room for the record of a new attempt to answer ``user_message`` (the caller's
    transaction and tenant scope): the current record of the earlier attempt stays, marked
    superseded, when the provider billed it (a reply that failed part-way was billed too, and
    the usage reports must count it); one that cost nothing (the attempt failed before the
    provider answered) is deleted. A regenerated or edited reply's record was already marked
    when the reply was superseded (``chats.services.revisions``)."""
    earlier = TurnRecord.objects.current().filter(user_message=user_message)
    earlier.filter(BILLED).update(superseded_at=timezone.now())
    earlier.exclude(BILLED).delete()


def turn_cost_comparison(record: TurnRecord) -> CostComparison:
    """The turn's bill against the whole history with caching; the prompt's tokens against
    the whole history's, both counted by the same counter (the estimate). The offline
    provider's cache figures are its simulation, and said so. (``model_profile`` is read:
    select it with the record.)"""
    profile = record.model_profile
    return CostComparison(
        billed_usd=record.cost_usd,
        whole_history_usd=record.full_history_cost_usd,
        prompt_tokens=record.prompt_tokens_estimated,
        whole_history_tokens=int(record.hypothetical_tokens),
        cache_read_tokens=record.cache_read_tokens,
        cache_write_tokens=record.cache_write_tokens,
        simulated=profile is not None and profile.provider_kind.simulated,
        billed_prompt_tokens=int(record.prompt_tokens_reported or 0),
    )
