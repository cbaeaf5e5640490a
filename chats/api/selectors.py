"""Reads the API needs beyond the shared selectors. Each takes the tenant (and the user it
answers for) and runs in the tenant's scope; a missing object and another tenant's (or user's)
look the same: None, or an empty result."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import F, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from chatplatform.core.llm.cost_comparison import CostComparison, comparison_of
from chatplatform.db import row_instances, select_columns
from chatplatform.models import ContextPolicy, Membership, ModelProfile
from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageRole,
    Participant,
    TurnRecord,
)
from chatplatform.selectors import turn_usage_sums
from chatplatform.tenancy.scoping import tenant_scope


def conversations_of(
    tenant_id: int,
    user: Any,
    *,
    archived: bool | None = None,
    search: str = "",
    updated_since: datetime | None = None,
) -> QuerySet[Conversation]:
    """The conversations of ``tenant_id`` in which ``user`` takes part, filtered: ``archived``
    True/False (None: both), ``search`` in the title (case-insensitive), updated at or after
    ``updated_since``. Lazy; the tenant filter is part of it."""
    with tenant_scope(tenant_id):
        mine = Participant.objects.filter(user=user).values("conversation_id")
        queryset = (
            Conversation.objects.filter(pk__in=mine)
            .select_related("created_by")
            .prefetch_related("participants")
        )
    if archived is not None:
        queryset = queryset.filter(archived_at__isnull=not archived)
    if search:
        queryset = queryset.filter(title__icontains=search)
    if updated_since is not None:
        queryset = queryset.filter(updated_at__gte=updated_since)
    return queryset


def conversation_detail(conversation: Conversation) -> Conversation:
    """The conversation reloaded with what its representation shows (one query + prefetch)."""
    with tenant_scope(conversation.tenant_id):
        return (
            Conversation.objects.select_related("created_by")
            .prefetch_related("participants")
            .get(pk=conversation.pk)
        )


def messages_of(conversation: Conversation) -> QuerySet[Message]:
    """The conversation's messages (lazy; paginate it by ``seq``)."""
    with tenant_scope(conversation.tenant_id):
        return Message.objects.filter(conversation_id=conversation.pk).select_related("author")


def message_in(conversation: Conversation, message_id: int) -> Message | None:
    with tenant_scope(conversation.tenant_id):
        return (
            Message.objects.select_related("author")
            .filter(conversation_id=conversation.pk, pk=message_id)
            .first()
        )


def reply_to(tenant_id: int, user_message_id: int) -> Message | None:
    """The assistant reply answering ``user_message_id`` (any status), or None. A message has
    at most one (``message_one_reply_per_message``), so the row is read without the ORDER BY
    of ``first()``: Django builds an ordering reference for every selected column of the
    join (the message's and its author's) for it, a third of the query's CPU (1.5 ms)."""
    with tenant_scope(tenant_id):
        try:
            return Message.objects.select_related("author").get(
                answers_id=user_message_id, role=MessageRole.ASSISTANT
            )
        except Message.DoesNotExist:
            return None


def turn_record_for(conversation: Conversation, message_id: int) -> TurnRecord | None:
    """The current record of the turn of ``message_id`` in this conversation: the turn that
    answered it (a user message) or produced it (a reply). A regenerated or edited reply's
    earlier records are superseded. The record comes with its model profile, which its
    representation reads; not with its policy (a row of some 60 columns, read by none of its
    callers): Django compiles every selected column of the join for each query, and the
    policy's took about half of the 2.7 ms of CPU this query cost."""
    with tenant_scope(conversation.tenant_id):
        return (
            TurnRecord.objects.current()
            .select_related("model_profile")
            .filter(conversation_id=conversation.pk)
            .filter(Q(user_message_id=message_id) | Q(assistant_message_id=message_id))
            .order_by("-created_at", "-pk")
            .first()
        )


def turn_outcome(
    conversation: Conversation, message_id: int
) -> tuple[Message | None, TurnRecord | None]:
    """The reply to the user message ``message_id`` (:func:`reply_to`) and the current record
    of its turn (:func:`turn_record_for`), read together once a reply is final. On
    PostgreSQL one statement without the ORM's query building (about 4.5 ms of CPU through
    the ORM's two queries, on every request of the SDK-compatible API)."""
    if connection.vendor != "postgresql":
        return reply_to(conversation.tenant_id, message_id), turn_record_for(
            conversation, message_id
        )
    tenant_id = conversation.tenant_id
    with connection.cursor() as cursor:
        cursor.execute(
            _turn_outcome_sql(),
            [message_id, tenant_id, MessageRole.ASSISTANT.value, tenant_id, conversation.pk],
        )
        row = cursor.fetchone()
    reply, author, record, profile = row_instances(
        row, Message, get_user_model(), TurnRecord, ModelProfile
    )
    if reply is not None:
        reply.author = author
    if record is not None:
        record.model_profile = profile
    return reply, record


@functools.cache
def _turn_outcome_sql() -> str:
    users = get_user_model()
    records = TurnRecord._meta.db_table
    return (
        f"SELECT {select_columns(Message, 'r')}, {select_columns(users, 'a')}, "  # noqa: S608
        f"{select_columns(TurnRecord, 't')}, {select_columns(ModelProfile, 'p')} "
        "FROM (SELECT %s::bigint AS id) q "
        f"LEFT JOIN {Message._meta.db_table} r ON r.tenant_id = %s AND r.answers_id = q.id "
        "AND r.role = %s "
        f"LEFT JOIN {users._meta.db_table} a ON a.id = r.author_id "
        f"LEFT JOIN LATERAL (SELECT * FROM {records} x WHERE x.tenant_id = %s "
        "AND x.conversation_id = %s AND x.superseded_at IS NULL "
        "AND (x.user_message_id = q.id OR x.assistant_message_id = q.id) "
        "ORDER BY x.created_at DESC, x.id DESC LIMIT 1) t ON true "
        f"LEFT JOIN {ModelProfile._meta.db_table} p ON p.id = t.model_profile_id"
    )


def members_by_username(tenant_id: int, usernames: list[str]) -> dict[str, Any]:
    """``{username: user}`` of the active users among ``usernames`` who are members of the
    tenant (one query)."""
    with tenant_scope(tenant_id):
        memberships = Membership.objects.filter(
            user__username__in=usernames, user__is_active=True
        ).select_related("user")
        return {m.user.username: m.user for m in memberships}


def member_by_username(tenant_id: int, username: str) -> Any | None:
    return members_by_username(tenant_id, [username]).get(username)


def policy_visible(tenant_id: int, policy_id: int) -> ContextPolicy | None:
    """A policy of the tenant or a preset, with its model profile; None otherwise."""
    with tenant_scope(tenant_id):
        return ContextPolicy.objects.select_related("model_profile").filter(pk=policy_id).first()


def model_profiles(tenant_id: int) -> QuerySet[ModelProfile]:
    """The tenant's own model profiles and the shared ones (lazy)."""
    with tenant_scope(tenant_id):
        return ModelProfile.objects.order_by("provider", "name", "pk")


def model_profile(tenant_id: int, profile_id: int) -> ModelProfile | None:
    with tenant_scope(tenant_id):
        return ModelProfile.objects.filter(pk=profile_id).first()


@dataclass(frozen=True)
class UsageRow:
    """Usage of one model on one day."""

    day: date
    model_profile_id: int | None
    model_name: str
    model: str
    turns: int
    prompt_tokens: int
    completion_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    hypothetical_tokens: int
    cost_usd: Decimal
    full_history_cost_usd: Decimal
    #: Turns answered by the offline provider (their cache figures are simulated).
    simulated_turns: int = 0

    @property
    def comparison(self) -> CostComparison:
        """The bill against the whole history with caching, as every surface tells it."""
        return comparison_of(self)


def usage_by_day_and_model(
    tenant_id: int, *, since: date, until: date, author: Any = None
) -> list[UsageRow]:
    """Per day (UTC) and model: turns, prompt (provider-reported, else estimated),
    completion, cache read/write and hypothetical tokens, and cost, for turns created from
    ``since`` to ``until`` inclusive; only turns answering ``author``'s messages when given.
    ONE grouped query on ``(tenant, created_at)``."""
    start = datetime.combine(since, time.min, tzinfo=timezone.get_current_timezone())
    end = datetime.combine(until + timedelta(days=1), time.min, tzinfo=start.tzinfo)
    with tenant_scope(tenant_id):
        queryset = TurnRecord.objects.filter(created_at__gte=start, created_at__lt=end)
        if author is not None:
            queryset = queryset.filter(user=author)
        rows = list(
            queryset.annotate(day=TruncDate("created_at"))
            .values("day", "model_profile_id")
            .annotate(
                model_name=F("model_profile__name"),
                model=F("model_profile__model"),
                **turn_usage_sums(),
            )
            .order_by("day", "model_profile_id")
        )
    return [
        UsageRow(
            day=row["day"],
            model_profile_id=row["model_profile_id"],
            model_name=row["model_name"] or "",
            model=row["model"] or "",
            turns=row["turns"],
            prompt_tokens=int(row["prompt"] or 0),
            completion_tokens=int(row["completion"] or 0),
            cache_read_tokens=int(row["cache_read"] or 0),
            cache_write_tokens=int(row["cache_write"] or 0),
            hypothetical_tokens=int(row["hypothetical"] or 0),
            cost_usd=Decimal(row["cost"] or 0),
            full_history_cost_usd=Decimal(row["full_cost"] or 0),
            simulated_turns=int(row["simulated"] or 0),
        )
        for row in rows
    ]
