"""Synchronous database steps of a reply (called from the async runner through
``database_sync_to_async``). Each step is its own transaction and is idempotent."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from chatplatform.core.context.formatting import tool_calls_text
from chatplatform.core.llm.base import ChatRequest, Usage
from chatplatform.core.llm.cache_simulation import simulated_prompt_usage
from chatplatform.core.llm.cost_comparison import COST_QUANTUM, CostComparison
from chatplatform.core.llm.prompt_cache import CacheUsage
from chatplatform.core.llm.tools import FACT_TOOLS
from chatplatform.core.tokens import TokenCounter
from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Conversation, Message, MessageRole, Status
from chatplatform.policies import policy_for
from chatplatform.spend_limits import QuotaExceeded, spend_limits_check
from chatplatform.spending import SpendEntry, spend_month
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn, turn_record_create
from chats.assembly.records import turn_record_build, turn_record_retire
from chats.assembly.request import (
    attached_image,
    chat_request,
    full_history_usage_for,
)
from chats.assembly.service import TurnContext
from chats.replies.calibration import calibration_record, exact_prompt_tokens_near_budget
from chats.replies.provider_context import NOTHING_MANAGED, ProviderManaged, provider_context_record
from chats.replies.simulated_cache import ConversationCache, conversation_cache
from chats.replies.titles import conversation_name_after_first_exchange
from chats.retrieval.tasks import schedule_embedding
from chats.services.conversations import conversation_window_advance
from chats.services.hot_writes import MessageAndReply, hot_writes
from chats.services.messages import (
    final_token_count,
    message_create,
    message_fields,
    message_finish,
)
from chats.token_counts.recount import recount_queue
from memory.services import facts_mark_used
from summaries.scheduling import schedule_summary_if_needed

logger = logging.getLogger(__name__)

#: How many recent user messages are checked for a missing reply (the queue depth).
QUEUE_WINDOW = 50


@dataclass
class PreparedTurn:
    tenant_id: int
    conversation_id: int
    user_message_id: int
    assistant_message_id: int
    user_id: int | None
    provider_name: str
    base_url: str
    request: ChatRequest
    estimated_prompt_tokens: int
    tools: bool
    #: The turn's model (its prices give the cost; its calibration learns from the usage).
    profile: ModelProfile
    hypothetical_tokens: int
    conversation: Conversation
    #: How the provider would have billed this turn's prompt sending the whole history.
    full_history: CacheUsage = field(default_factory=lambda: CacheUsage(0, 0, 0))
    #: The conversation's simulated prompt cache: the offline provider bills from it, and so
    #: does a reply cut off before its provider reported usage.
    simulated_cache: ConversationCache | None = None
    #: The counter the prompt was counted with (its blocks are counted again to simulate).
    counter: TokenCounter | None = None
    #: The API key the message was sent with (its spending counts against the key's limit).
    api_key_id: int | None = None
    #: The names of the tools the client offered (it runs them: a call ends the turn).
    client_tools: frozenset[str] = frozenset()


def waiting_messages(tenant_id: int, conversation_id: int) -> list[int]:
    """User messages (and tool results a client sent: an imported history's have no author
    and need no reply) among the newest ``QUEUE_WINDOW`` without a live reply, oldest first (a
    failed reply counts as none, so a retried send is answered again). One indexed query
    (written out: it runs on every turn, and the ORM's subquery building costs more than the
    query)."""
    table = Message._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.id, EXISTS (SELECT 1 FROM {table} r WHERE r.tenant_id = m.tenant_id "  # noqa: S608
            "AND r.answers_id = m.id AND r.status <> %s) "
            f"FROM {table} m WHERE m.tenant_id = %s AND m.conversation_id = %s "
            "AND (m.role = %s OR (m.role = %s AND m.author_id IS NOT NULL)) "
            "ORDER BY m.seq DESC LIMIT %s",
            [
                Status.FAILED,
                tenant_id,
                conversation_id,
                MessageRole.USER,
                MessageRole.TOOL,
                QUEUE_WINDOW,
            ],
        )
        recent = cursor.fetchall()
    return [pk for pk, answered in reversed(recent) if not answered]


@dataclass(frozen=True)
class Unanswered:
    """A waiting message given a failed reply without a provider call: its preparation
    failed unexpectedly, or a spending limit refused it."""

    reply_id: int | None
    code: str
    text: str
    retryable: bool = True

    def event(self) -> dict[str, Any]:
        """The reply's closing event for the conversation's sockets."""
        return {
            "type": "error",
            "code": self.code,
            "message": self.text,
            "message_id": self.reply_id,
            "status": "failed",
            "partial": False,
            "retryable": self.retryable,
        }


@dataclass
class NextTurn:
    """What :func:`turn_prepare_next` found: the message ids it tried, the prepared turn
    (None when nothing is waiting), whether more messages wait after it, and the messages it
    gave a failed reply instead (:class:`Unanswered`)."""

    tried: list[int]
    prepared: PreparedTurn | None
    more: bool
    failures: list[Unanswered]


#: What the user is told when their message could not be answered because of a bug of ours.
INTERNAL_ERROR_TEXT = (
    "The reply could not be generated because of an internal error. Send it again."
)


def turn_prepare_next(
    tenant_id: int,
    conversation_id: int,
    skip: frozenset[int] = frozenset(),
    *,
    spend_checked: int | None = None,
) -> NextTurn:
    """Prepare the reply to the oldest waiting message not in ``skip``. A message whose
    author, key or tenant reached a hard spending limit, or whose preparation raises, gets a
    failed reply (so it is never left without an outcome) and the next one is tried.
    ``spend_checked``: a message whose limits the caller checked a moment ago (not read
    again)."""
    waiting = [m for m in waiting_messages(tenant_id, conversation_id) if m not in skip]
    found = NextTurn(tried=[], prepared=None, more=False, failures=[])
    for position, message_id in enumerate(waiting):
        found.tried.append(message_id)
        try:
            prepared = turn_prepare(tenant_id, message_id, spend_check=message_id != spend_checked)
        except QuotaExceeded as exc:
            reply_id = turn_refuse(tenant_id, message_id, exc.code, exc.message)
            found.failures.append(Unanswered(reply_id, exc.code, exc.message, retryable=False))
            continue
        except Exception:
            logger.exception("preparing the reply to message %s failed", message_id)
            reply_id = internal_error_record(tenant_id, message_id)
            found.failures.append(Unanswered(reply_id, "internal_error", INTERNAL_ERROR_TEXT))
            continue
        if prepared is not None:
            found.prepared = prepared
            found.more = position + 1 < len(waiting)
            return found
    return found


def internal_error_record(tenant_id: int, user_message_id: int) -> int | None:
    """Give ``user_message_id`` a failed reply saying an internal error happened; returns the
    reply's id, or None when even that could not be stored (logged, never raised)."""
    try:
        return turn_fail_unexpectedly(tenant_id, user_message_id, INTERNAL_ERROR_TEXT)
    except Exception:
        logger.exception("could not mark the reply to %s failed", user_message_id)
        return None


def turn_fail_unexpectedly(tenant_id: int, user_message_id: int, error: str) -> int | None:
    """Mark the reply to ``user_message_id`` failed after an unexpected error (creating the
    row if needed), so the user message is never left without an outcome. Returns its id."""
    return turn_refuse(tenant_id, user_message_id, "internal_error", error)


def turn_refuse(tenant_id: int, user_message_id: int, code: str, error: str) -> int | None:
    """Give ``user_message_id`` a failed reply saying ``error`` (``code``), creating the row
    if needed; a reply that had streamed text ends incomplete instead. Returns its id."""
    with tenant_scope(tenant_id):
        user_message = Message.objects.filter(pk=user_message_id).first()
        if user_message is None:
            return None
        conversation = Conversation.objects.get(pk=user_message.conversation_id)
        reply, _ = message_create(
            conversation=conversation,
            role=MessageRole.ASSISTANT,
            content="",
            answers=user_message,
            status=Status.FAILED,
            validate=False,
        )
        if reply.status == Status.STREAMING:
            message_finish(
                message=reply,
                content=reply.content,
                status=Status.INCOMPLETE if reply.content else Status.FAILED,
                error_code=code,
                error_message=error,
            )
        elif reply.status == Status.FAILED:
            Message.objects.filter(pk=reply.pk).update(error_code=code, error_message=error)
    return reply.pk


def turn_prepare(
    tenant_id: int,
    user_message_id: int,
    *,
    budget_override: int | None = None,
    spend_check: bool = False,
) -> PreparedTurn | None:
    """Create (or reuse a failed) streaming assistant row, assemble, record the turn.

    Returns None when the message already has a live reply (another runner answered it).
    ``spend_check``: raise QuotaExceeded (nothing stored) when the message's author, its API
    key or the tenant reached a hard spending limit.
    """
    with tenant_scope(tenant_id):
        user_message, reply_id, reply_status = _message_and_reply(tenant_id, user_message_id)
        conversation = user_message.conversation
        if reply_id is not None and reply_status != Status.FAILED and budget_override is None:
            if reply_status != Status.STREAMING:
                return None
        if spend_check:
            spend_limits_check(tenant_id, user_message.author_id, user_message.api_key_id)
        image = attached_image(user_message, policy_for(conversation))
        if image is not None and image.tokens:
            # The image's tokens come off the prompt budget before the text is packed.
            budget_override = (
                min(budget_override or image.prompt_budget, image.prompt_budget) - image.tokens
            )
        turn = assemble_turn(
            conversation,
            user_message,
            budget_override=budget_override,
            conversation_is_fresh=True,
            content_note=image.note if image is not None else "",
        )
        exact = exact_prompt_tokens_near_budget(turn)
        if exact is not None and exact > turn.prompt.budget:
            # The provider's own count says the estimate was low: shrink and re-assemble.
            turn = assemble_turn(
                conversation,
                user_message,
                budget_override=int(turn.prompt.budget * turn.prompt.budget / exact * 0.98),
                conversation_is_fresh=True,
                content_note=image.note if image is not None else "",
            )
        try:
            if reply_id is None:
                reply_id = _reply_and_record_insert(turn, user_message)
            else:
                _reply_and_record_reset(turn, user_message, reply_id, reply_status)
        except IntegrityError:
            # The database's one-reply-per-message rule: another runner created the reply
            # since we looked, and answers it. Nothing of ours was stored.
            return None
        # The facts this prompt holds are used: marked once the turn is stored (one update).
        used_facts = [item.id for item in turn.prompt.included if item.kind == "fact"]
        if used_facts:
            transaction.on_commit(lambda: facts_mark_used(tenant_id, used_facts))
        now = timezone.now()
        full_history = full_history_usage_for(turn, conversation, now)
        conversation_window_advance(
            conversation,
            turn.prompt.window_start_seq,
            turn.prompt.recalled_ids,
            now,
            turn.hypothetical_tokens,
            turn.prompt.summary_ids,
            turn.prompt.recalled_excerpt_ids,
        )
    profile = turn.profile
    tools = bool(turn.policy.tools_enabled and profile.supports_tools)
    request = chat_request(turn, tools, image, offered=user_message.offered_tools)
    return PreparedTurn(
        tenant_id=tenant_id,
        conversation_id=conversation.pk,
        user_message_id=user_message.pk,
        assistant_message_id=reply_id,
        user_id=user_message.author_id,
        api_key_id=user_message.api_key_id,
        provider_name=profile.provider,
        base_url=profile.base_url,
        request=request,
        estimated_prompt_tokens=turn.prompt.prompt_tokens,
        tools=tools,
        # The tools the request offers beyond the platform's own are the client's.
        client_tools=frozenset(t.name for t in request.tools if t not in FACT_TOOLS),
        profile=profile,
        hypothetical_tokens=turn.hypothetical_tokens,
        conversation=conversation,
        full_history=full_history,
        simulated_cache=conversation_cache(conversation, profile),
        counter=turn.counter,
    )


def _reply_and_record_insert(turn: TurnContext, user_message: Message) -> int:
    """First attempt: the streaming reply row and the turn's record, together; returns the
    reply's id. Raises IntegrityError when a reply exists."""
    record = turn_record_build(turn=turn, user_message=user_message)
    fields = message_fields(
        user_message.conversation,
        MessageRole.ASSISTANT,
        "",
        answers=user_message,
        status=Status.STREAMING,
        token_count=None,
        token_counter="",
    )
    reply = hot_writes().reply_insert_with_record(fields, record, timezone.now())
    recount_queue(user_message.tenant_id, user_message.conversation_id, turn.prompt.recounted)
    return reply.pk


def _reply_and_record_reset(
    turn: TurnContext, user_message: Message, reply_id: int, reply_status: str
) -> None:
    """A retry: reuse the reply row (a failed one streams again) and make this turn's record
    the current one (the earlier attempt's is kept superseded if billed), in one transaction."""
    with transaction.atomic():
        if reply_status == Status.FAILED:
            Message.objects.filter(pk=reply_id).update(
                status=Status.STREAMING, content="", error_code="", error_message=""
            )
        turn_record_retire(user_message)
        turn_record_create(
            turn=turn, user_message=user_message, savepoint=False, assistant_message_id=reply_id
        )


def _message_and_reply(tenant_id: int, user_message_id: int) -> MessageAndReply:
    """The user message (conversation and author loaded) and its reply's id and status.
    Raises Message.DoesNotExist."""
    found = hot_writes().message_for_reply(tenant_id, user_message_id)
    if found is None:
        raise Message.DoesNotExist(f"message {user_message_id} does not exist")
    return found


def reply_content_flush(tenant_id: int, message_id: int, content: str) -> None:
    """Store the reply as it grows (called at intervals, not per token)."""
    with tenant_scope(tenant_id):
        # updated_at is the reply's heartbeat: the recovery sweep spares replies written to
        # recently (a queryset update does not touch auto_now fields by itself).
        Message.objects.filter(pk=message_id, status=Status.STREAMING).update(
            content=content, updated_at=timezone.now()
        )


def turn_finish(
    prepared: PreparedTurn,
    *,
    content: str,
    status: str,
    usage: Any = None,
    error_code: str = "",
    error_message: str = "",
    ttft_ms: int | None = None,
    duration_ms: int | None = None,
    managed: ProviderManaged = NOTHING_MANAGED,
    prompt_sent: bool = False,
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Store the reply, its usage and cost and what the provider's context management did (one
    transaction); schedule follow-up work after commit. Returns the usage summary for clients.

    ``prompt_sent``: the provider started answering (a reply stopped or cut off midway), so
    its prompt was billed: without a usage report, the prompt is recorded as the provider's
    cache would have billed it (:func:`unreported_prompt_usage`). ``tool_calls``: the calls of
    the tools the client runs, which ended the reply (``[{"id", "name", "input"}]``), stored
    with it and counted in its tokens."""
    reported = usage is not None
    if usage is None and prompt_sent:
        usage = unreported_prompt_usage(prepared)
    fields: dict[str, Any] = {
        "assistant_message_id": prepared.assistant_message_id,
        "time_to_first_token_ms": ttft_ms,
        "duration_ms": duration_ms,
        "prompt_tokens_reported": None,
        "completion_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": Decimal(0),
        "full_history_cost_usd": Decimal(0),
    }
    profile = prepared.profile
    if usage is not None:
        fields.update(
            prompt_tokens_reported=usage.input_tokens
            + usage.cache_read_tokens
            + usage.cache_write_tokens,
            completion_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_usd=profile.cost_usd(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                cache_ttl=prepared.request.cache_ttl,
            ).quantize(COST_QUANTUM),
            full_history_cost_usd=profile.cost_usd(
                input_tokens=prepared.full_history.uncached,
                output_tokens=usage.output_tokens,
                cache_read_tokens=prepared.full_history.read,
                cache_write_tokens=prepared.full_history.written,
            ).quantize(COST_QUANTUM),
        )
        if not reported:  # billed as the provider would have, but it said nothing
            fields["prompt_tokens_reported"] = None
    fields["cost_usd"] += managed.compaction_cost(prepared)  # billed apart from the reply
    conversation = prepared.conversation
    simulated = profile.provider_kind.simulated
    calibrate = reported and not simulated and not managed.compacted
    # The write is atomic by itself; the calibration joins it in a transaction.
    atomic = (
        transaction.atomic() if calibrate or managed or tool_calls else contextlib.nullcontext()
    )
    now = timezone.now()
    with tenant_scope(prepared.tenant_id), atomic:
        token_count, counter = final_token_count(
            conversation, tool_calls_text(content, tool_calls) if tool_calls else content
        )
        # The reply, its conversation's token total and the turn's usage, together.
        recorded = hot_writes().reply_finish(
            tenant_id=prepared.tenant_id,
            message_id=prepared.assistant_message_id,
            user_message_id=prepared.user_message_id,
            content=content,
            status=status,
            token_count=token_count,
            token_counter=counter.name,
            tokens_added=token_count + counter.message_overhead,
            error_code=error_code,
            error_message=error_message,
            turn=fields,
            now=now,
            spend=_spend_entry(prepared, fields, usage, now),
        )
        if tool_calls:
            Message.objects.filter(pk=prepared.assistant_message_id).update(
                tool_calls=tool_calls, tool_group=tool_calls[0]["id"]
            )
        provider_context_record(prepared, managed)
        if calibrate:
            calibration_record(
                profile.pk, prepared.estimated_prompt_tokens, fields["prompt_tokens_reported"]
            )
        transaction.on_commit(lambda: after_reply(conversation))
    if prepared.simulated_cache is not None:
        prepared.simulated_cache.keep()  # what this turn's prompt read and wrote
    summary: dict[str, Any] = {"prompt_tokens_estimated": prepared.estimated_prompt_tokens}
    if recorded:
        summary.update(
            prompt_tokens=fields["prompt_tokens_reported"],
            completion_tokens=fields["completion_tokens"],
            cache_read_tokens=fields["cache_read_tokens"],
            cache_write_tokens=fields["cache_write_tokens"],
            hypothetical_tokens=prepared.hypothetical_tokens,
            cost_usd=str(fields["cost_usd"]),
            full_history_cost_usd=str(fields["full_history_cost_usd"]),
            cost=CostComparison(
                billed_usd=fields["cost_usd"],
                whole_history_usd=fields["full_history_cost_usd"],
                prompt_tokens=prepared.estimated_prompt_tokens,
                whole_history_tokens=prepared.hypothetical_tokens,
                cache_read_tokens=fields["cache_read_tokens"],
                cache_write_tokens=fields["cache_write_tokens"],
                simulated=simulated,
                billed_prompt_tokens=fields["prompt_tokens_reported"] or 0,
            ).as_dict(),
        )
    return summary


def _spend_entry(
    prepared: PreparedTurn, fields: dict[str, Any], usage: Usage | None, now: datetime
) -> SpendEntry | None:
    """What the turn adds to its month's spending totals (None: nothing was billed)."""
    tokens = 0
    if usage is not None:
        tokens = (
            usage.input_tokens
            + usage.cache_read_tokens
            + usage.cache_write_tokens
            + usage.output_tokens
        )
    if not tokens and not fields["cost_usd"]:
        return None
    return SpendEntry(
        month=spend_month(prepared.tenant_id, now),
        user_pk=prepared.user_id or 0,
        api_key_pk=prepared.api_key_id or 0,
        cost_usd=fields["cost_usd"],
        tokens=tokens,
    )


def unreported_prompt_usage(prepared: PreparedTurn) -> Usage:
    """The prompt of a reply whose provider reported no usage before it was cut off: the
    prompt's estimated tokens, split as the provider's cache would have billed them (on the
    conversation's simulated cache; all of it uncached where that cache is not modelled),
    no output."""
    simulated, counter = prepared.simulated_cache, prepared.counter
    if simulated is None or simulated.cache is None or counter is None:
        return Usage(input_tokens=prepared.estimated_prompt_tokens)
    return simulated_prompt_usage(
        prepared.request,
        simulated.cache,
        time.time(),
        counter.count,
        prepared.estimated_prompt_tokens,
    )


def after_reply(conversation: Conversation) -> None:
    """What the policy asks after a reply: a rolling summary when the threshold is crossed;
    an untitled conversation's title."""
    conversation_name_after_first_exchange(conversation)  # never raises
    schedule_embedding(conversation)  # retrieval by meaning: embed the new turns; never raises
    try:
        schedule_summary_if_needed(conversation)
    except Exception:  # a scheduling failure must not fail the reply that was stored
        logger.exception("could not schedule a summary for conversation %s", conversation.pk)
