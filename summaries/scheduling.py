"""When a summary job runs: the checks that decide, after a turn or when a conversation
continues another, whether to queue one, and the queueing after the transaction commits.
Callers (the reply pipeline, the web UI, the API) use these; the jobs are in ``tasks``."""

from __future__ import annotations

from django.core.cache import cache
from django.db import transaction

from chatplatform.locks import in_cooldown, lock_key
from chatplatform.models.conversations import Conversation
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from summaries.services.continuation import needs_continuation_summary
from summaries.services.rolling import failure_key, rolling_state, uses_summaries
from summaries.services.storage import load_conversation
from summaries.tasks import refresh_rolling_summary, summarize_for_continuation


def schedule_summary_if_needed(conversation: Conversation) -> bool:
    """Called by the reply pipeline after a turn: when the conversation crossed its summary
    threshold, dispatch ``refresh_rolling_summary`` after the transaction commits.

    Cheap (the policy and one indexed aggregate) and deduplicated for a short while, so
    calling it on every turn is fine. Returns True when a run was scheduled.
    """
    policy = policy_for(conversation)
    if not uses_summaries(policy):
        return False
    with tenant_scope(conversation.tenant_id):
        fresh = Conversation.objects.filter(pk=conversation.pk).first()
    if fresh is None:
        return False
    state = rolling_state(fresh, policy)
    if not state.due or in_cooldown(failure_key(fresh, state.covered_upto + 1)):
        return False
    if not cache.add(lock_key(f"rolling-scheduled:t{fresh.tenant_id}:c{fresh.pk}"), 1, 30):
        return False
    tenant_id, conversation_id = fresh.tenant_id, fresh.pk

    def dispatch() -> None:
        refresh_rolling_summary.delay(tenant_id, conversation_id)

    transaction.on_commit(dispatch)
    return True


def schedule_continuation_summary(conversation: Conversation) -> bool:
    """For a new conversation that continues another: if the earlier one has no summary of
    its whole history yet, dispatch ``summarize_for_continuation`` after commit."""
    if not conversation.continues_id or not conversation.carry_over_summary:
        return False
    earlier = load_conversation(conversation.tenant_id, conversation.continues_id)
    if earlier is None or not needs_continuation_summary(earlier):
        return False
    tenant_id, earlier_id = earlier.tenant_id, earlier.pk

    def dispatch() -> None:
        summarize_for_continuation.delay(tenant_id, earlier_id)

    transaction.on_commit(dispatch)
    return True
