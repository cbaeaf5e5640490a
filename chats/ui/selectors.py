"""Reads of the web UI. Each takes the tenant (and the user) it answers for and runs inside
that tenant's scope; objects of another tenant or user are simply not found."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from chatplatform.core.context.formatting import person_label
from chatplatform.core.llm.spend_limits import MEMBER
from chatplatform.models import Membership, Tenant
from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageRole,
    Participant,
    TurnRecord,
)
from chatplatform.policies import policy_for
from chatplatform.selectors import administered_tenant_ids
from chatplatform.spending import spend_used_this_month
from chatplatform.tenancy.scoping import tenant_scope
from chats.selectors import revision_counts
from chats.services.conversations import conversation_may_delete

CONVERSATIONS_LISTED = 50
MESSAGES_PER_PAGE = 100
MAX_SEARCH_CHARS = 200


def conversations_of(
    tenant: Tenant,
    user: Any,
    *,
    query: str = "",
    archived: bool = False,
    limit: int = CONVERSATIONS_LISTED,
) -> list[Conversation]:
    """The user's conversations in ``tenant`` (the archived ones when ``archived``, else the
    others), most recently active first; ``query`` matches the title or any message's text.
    Each row carries ``last_activity``, ``last_text`` (the newest message with text: a reply
    still streaming or failed has none yet) and ``has_messages``."""
    # PostgreSQL text cannot hold NUL (no stored text has one): it is dropped from the query.
    query = query.replace("\x00", "").strip()[:MAX_SEARCH_CHARS]
    with tenant_scope(tenant):
        latest = Message.objects.filter(conversation_id=OuterRef("pk")).order_by("-seq")
        mine = Participant.objects.filter(conversation_id=OuterRef("pk"), user=user)
        conversations = (
            Conversation.objects.filter(Exists(mine), archived_at__isnull=not archived)
            .annotate(
                last_activity=Coalesce(Subquery(latest.values("created_at")[:1]), "created_at"),
                last_text=Subquery(latest.exclude(content="").values("content")[:1]),
                has_messages=Exists(latest),
            )
            .order_by("-last_activity", "-pk")
        )
        if query:
            matching = Message.objects.filter(
                conversation_id=OuterRef("pk"), content__icontains=query
            )
            conversations = conversations.filter(Q(title__icontains=query) | Exists(matching))
        return list(conversations[:limit])


@dataclass(frozen=True)
class SidebarRow:
    """A conversation as the sidebar lists it, with what the user may do to it."""

    conversation: Conversation
    may_delete: bool


def sidebar_rows(
    tenant: Tenant, user: Any, *, query: str = "", archived: bool = False
) -> list[SidebarRow]:
    """The user's conversations (:func:`conversations_of`), each saying whether the user may
    delete it for everyone (else they may leave it)."""
    admin = tenant.pk in administered_tenant_ids(user)
    return [
        SidebarRow(c, conversation_may_delete(c, user, admin=admin))
        for c in conversations_of(tenant, user, query=query, archived=archived)
    ]


def archived_count(tenant: Tenant, user: Any) -> int:
    """How many of the user's conversations in ``tenant`` are archived."""
    with tenant_scope(tenant):
        mine = Participant.objects.filter(user=user).values("conversation_id")
        return Conversation.objects.filter(pk__in=mine, archived_at__isnull=False).count()


@dataclass(frozen=True)
class ConversationHeader:
    """What the chat's header says about a conversation for ``user``: who answers (the
    model profile of the policy that governs it, and that policy) and what they may do."""

    model_name: str
    policy_name: str
    may_delete: bool


def conversation_header(conversation: Conversation, user: Any) -> ConversationHeader:
    policy = policy_for(conversation)
    admin = conversation.tenant_id in administered_tenant_ids(user)
    return ConversationHeader(
        model_name=policy.model_profile.name,
        policy_name=policy.name,
        may_delete=conversation_may_delete(conversation, user, admin=admin),
    )


@dataclass(frozen=True)
class ChatMessage:
    """A message as the chat view shows it."""

    message: Message
    author: str
    #: How many versions the message has: 1, or more when it was edited or regenerated (its
    #: earlier versions are kept as revisions, which the page lets the reader step through).
    versions: int = 1

    @property
    def tool_calls(self) -> list[tuple[str, str]]:
        """The tools a reply called for its client to run: each one's name and input (JSON)."""
        return [
            (str(call.get("name")), json.dumps(call.get("input"), ensure_ascii=False))
            for call in self.message.tool_calls or ()
        ]


@dataclass(frozen=True)
class MessageWindow:
    messages: list[ChatMessage]
    earlier_before_seq: int | None  # link target for "earlier messages", None: none left
    later_after_seq: int | None  # the window is not the newest: link to the newer ones


def message_window(
    conversation: Conversation,
    *,
    before_seq: int | None = None,
    around_seq: int | None = None,
    limit: int = MESSAGES_PER_PAGE,
) -> MessageWindow:
    """A page of messages in order: the newest (default), those before ``before_seq``, or
    those around ``around_seq`` (summary links), with how many versions each has. Three
    bounded queries at most."""
    bot_name = policy_for(conversation).bot_name
    with tenant_scope(conversation.tenant_id):
        base = Message.objects.filter(conversation_id=conversation.pk).select_related("author")
        if around_seq is not None:
            start = max(1, around_seq - limit // 4)
            rows = list(base.filter(seq__gte=start).order_by("seq")[:limit])
        else:
            newest = base.order_by("-seq")
            if before_seq is not None:
                newest = newest.filter(seq__lt=before_seq)
            rows = list(newest[:limit])[::-1]
        revised = revision_counts([m.pk for m in rows])
    first = rows[0].seq if rows else None
    last = rows[-1].seq if rows else None
    earlier = first if first is not None and first > 1 else None
    later = last if last is not None and last < conversation.last_seq else None
    return MessageWindow(
        messages=[ChatMessage(m, _author(m, bot_name), 1 + revised.get(m.pk, 0)) for m in rows],
        earlier_before_seq=earlier,
        later_after_seq=later,
    )


def _author(message: Message, bot_name: str) -> str:
    if message.role == MessageRole.ASSISTANT:
        return bot_name
    if message.role == MessageRole.TOOL:
        return "Tool results"
    user = message.author
    if user is None:
        return "(deleted user)"
    return person_label(user.username, user.first_name, user.last_name)


def participants_of(conversation: Conversation) -> list[Any]:
    """Users taking part in the conversation, by name."""
    with tenant_scope(conversation.tenant_id):
        user_ids = Participant.objects.filter(conversation_id=conversation.pk).values("user_id")
        return list(
            get_user_model()
            .objects.filter(pk__in=Subquery(user_ids))
            .order_by("first_name", "last_name", "username")
        )


def tenant_members(tenant: Tenant, *, exclude: Any = ()) -> QuerySet:
    """People who belong to ``tenant`` (its service user left out), as a User queryset."""
    with tenant_scope(tenant):
        user_ids = list(Membership.objects.filter(tenant=tenant).values_list("user_id", flat=True))
    excluded = {getattr(u, "pk", u) for u in exclude}
    if tenant.service_user_id:
        excluded.add(tenant.service_user_id)
    return (
        get_user_model()
        .objects.filter(pk__in=user_ids, is_active=True)
        .exclude(pk__in=excluded)
        .order_by("first_name", "last_name", "username")
    )


def turn_record_for(
    conversation: Conversation, *, message_id: int | None = None
) -> TurnRecord | None:
    """The current record of a turn of ``conversation`` (never a superseded one): the one
    answering (or answered by) ``message_id``, else the newest. None when there is none."""
    with tenant_scope(conversation.tenant_id):
        records = (
            TurnRecord.objects.current()
            .filter(conversation_id=conversation.pk)
            .select_related("model_profile", "policy")
        )
        if message_id is not None:
            records = records.filter(
                Q(user_message_id=message_id) | Q(assistant_message_id=message_id)
            )
        return records.order_by("-created_at", "-pk").first()


@dataclass(frozen=True)
class SpendingShown:
    """What a member is shown of their spending: "used this month" (when a limit applies to
    them) and the banner of a limit whose warning, or whose hard limit, is reached."""

    used: str
    banner: str
    refused: bool


def spending_shown(tenant: Tenant, user: Any) -> SpendingShown | None:
    """The member's spending this month against the limits that apply to them (theirs and
    the tenant's); None when none does."""
    spent, standings = spend_used_this_month(tenant.pk, user.pk)
    if not standings.items:
        return None
    used = f"${spent.cost_usd:.2f}"
    mine = next((item for item in standings.items if item.spender is MEMBER), None)
    if mine is not None and mine.limit.hard_usd is not None:
        used += f" of ${mine.limit.hard_usd:.2f}"
    if spent.tokens:
        used += f" · {spent.tokens:,} tokens"
    refusal = standings.refusal
    banner = (
        refusal.describe()
        if refusal is not None
        else " ".join(item.describe() for item in standings.warnings)
    )
    return SpendingShown(used=used, banner=banner, refused=refusal is not None)
