"""Where the summary services load a conversation (scoped), fetch its messages (bounded)
and store a summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from chatplatform.core.context.formatting import person_label
from chatplatform.core.tokens import TokenCounter
from chatplatform.counting import storage_counter_for
from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation, Message, Status
from chatplatform.tenancy.scoping import ScopeError, tenant_scope
from summaries.models import Summary
from summaries.summarizer import SourceMessage, SummaryDraft

MESSAGE_FIELDS = (
    "id",
    "seq",
    "role",
    "content",
    "status",
    "token_count",
    "token_counter",
    "created_at",
    "author__username",
    "author__first_name",
    "author__last_name",
)


@dataclass
class Result:
    """What a service run did; ``more`` asks the task to run again (bounded work per run)."""

    status: str = "ok"
    created: list[int] = field(default_factory=list)
    merged: list[int] = field(default_factory=list)
    superseded: list[int] = field(default_factory=list)
    more: bool = False
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "created": self.created,
            "merged": self.merged,
            "superseded": self.superseded,
            "more": self.more,
            "detail": self.detail,
        }


def load_conversation(tenant_id: int, conversation_id: int) -> Conversation | None:
    """The conversation if it belongs to ``tenant_id``; None otherwise (same for both)."""
    try:
        with tenant_scope(tenant_id):
            return Conversation.objects.filter(pk=conversation_id).first()
    except ScopeError:
        return None


@dataclass(frozen=True)
class Fetched:
    """Messages of a seq range: the summarizer's view plus what the summary row records."""

    messages: list[SourceMessage]
    first_id: int
    last_id: int
    first_seq: int
    last_seq: int
    first_at: datetime | None
    last_at: datetime | None
    source_tokens: int


def fetch_messages(
    conversation: Conversation,
    *,
    first_seq: int,
    last_seq: int,
    limit: int,
    counter: TokenCounter,
    bot_name: str,
    since: datetime | None = None,
) -> Fetched | None:
    """At most ``limit`` messages with ``first_seq <= seq <= last_seq`` (one indexed range
    query), oldest first; stops before a message still streaming. None when there are none."""
    if last_seq < first_seq or limit <= 0:
        return None
    with tenant_scope(conversation.tenant_id):
        queryset = Message.objects.filter(
            conversation_id=conversation.pk, seq__gte=first_seq, seq__lte=last_seq
        )
        if since is not None:
            queryset = queryset.filter(created_at__gte=since)
        rows = list(queryset.order_by("seq").values(*MESSAGE_FIELDS)[:limit])
    kept: list[dict[str, Any]] = []
    for row in rows:
        if row["status"] == Status.STREAMING:
            break
        kept.append(row)
    if not kept:
        return None
    messages: list[SourceMessage] = []
    source_tokens = 0
    for row in kept:
        if row["role"] == "assistant":
            author = bot_name
        else:
            author = person_label(
                row["author__username"], row["author__first_name"], row["author__last_name"]
            )
        messages.append(
            SourceMessage(
                seq=row["seq"],
                role=row["role"],
                content=row["content"],
                author=author,
                created_at=row["created_at"],
                id=row["id"],
            )
        )
        tokens = row["token_count"]
        if tokens is None or row["token_counter"] != counter.name:
            tokens = counter.count(row["content"])
        source_tokens += tokens + counter.message_overhead
    return Fetched(
        messages=messages,
        first_id=kept[0]["id"],
        last_id=kept[-1]["id"],
        first_seq=kept[0]["seq"],
        last_seq=kept[-1]["seq"],
        first_at=kept[0]["created_at"],
        last_at=kept[-1]["created_at"],
        source_tokens=source_tokens,
    )


def counter_for(policy: ContextPolicy) -> TokenCounter:
    return storage_counter_for(policy.model_profile)


def lock_conversation(conversation: Conversation) -> None:
    """Row-lock the conversation for the rest of the transaction (short: check-and-insert)."""
    with tenant_scope(conversation.tenant_id):
        list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values("pk"))


def create_summary(
    conversation: Conversation,
    *,
    kind: str,
    level: int,
    draft: SummaryDraft,
    first_seq: int,
    last_seq: int,
    first_message_id: int | None,
    last_message_id: int | None,
    source_tokens: int,
    period_start: datetime | None,
    period_end: datetime | None,
) -> Summary | None:
    """Insert a summary (inside the caller's transaction); None if the same range exists."""
    try:
        with transaction.atomic(), tenant_scope(conversation.tenant_id):
            return Summary.objects.create(
                tenant_id=conversation.tenant_id,
                conversation_id=conversation.pk,
                kind=kind,
                level=level,
                first_message_id=first_message_id,
                last_message_id=last_message_id,
                first_seq=first_seq,
                last_seq=last_seq,
                period_start=period_start,
                period_end=period_end,
                content=draft.content.as_content(),
                text=draft.text,
                token_count=draft.token_count,
                token_counter=draft.token_counter,
                source_tokens=source_tokens,
                model=draft.model[:100],
                prompt_version=draft.prompt_version[:20],
                cost_usd=draft.cost_usd,
            )
    except IntegrityError:
        return None
