"""Rolling summaries: thresholds, bounded chunks by seq range, merging, idempotency."""

from __future__ import annotations

import pytest

from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn
from chats.services import message_create
from summaries.scheduling import schedule_summary_if_needed
from summaries.services import rolling_state, summary_refresh
from tests.factories import make_conversation
from tests.summaries.helpers import (
    add_messages,
    current_rolling,
    db_snapshot,
    make_policy,
    summaries_of,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def policy(tenant_a):
    # raw window 6, interval 10, at most 3 summaries in context, 200-token summaries
    return make_policy(tenant_a)


def fresh(conversation):
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def test_nothing_happens_below_the_interval(tenant_a, conversation, member_a, policy):
    add_messages(conversation, 15, user=member_a)  # 9 outside the raw window of 6
    state = rolling_state(fresh(conversation), policy)
    assert state.pending == 9 and not state.due
    assert summary_refresh(tenant_a.pk, conversation.pk).status == "not_due"
    assert summaries_of(conversation) == []


def test_chunks_follow_the_interval_and_leave_the_raw_window(
    tenant_a, conversation, member_a, policy
):
    add_messages(conversation, 36, user=member_a)  # 30 outside the raw window
    result = summary_refresh(tenant_a.pk, conversation.pk)
    assert result.status == "created" and not result.more
    ranges = [(s.first_seq, s.last_seq) for s in current_rolling(conversation)]
    assert ranges == [(1, 10), (11, 20), (21, 30)]
    first = current_rolling(conversation)[0]
    with tenant_scope(tenant_a):
        first_message = Message.objects.get(conversation=conversation, seq=1)
        last_message = Message.objects.get(conversation=conversation, seq=10)
    assert (first.first_message_id, first.last_message_id) == (first_message.pk, last_message.pk)
    assert first.kind == "rolling" and first.level == 0
    assert first.model == "extractive" and first.prompt_version
    assert first.source_tokens > first.token_count > 0
    assert first.token_count <= policy.summary_max_tokens
    assert first.period_start == first_message.created_at


def test_each_run_is_bounded_and_asks_for_more(tenant_a, conversation, member_a, policy):
    add_messages(conversation, 86, user=member_a)  # 80 pending = 8 chunks
    result = summary_refresh(tenant_a.pk, conversation.pk, max_chunks=3)
    assert len(result.created) == 3 and result.more
    while result.more:
        result = summary_refresh(tenant_a.pk, conversation.pk, max_chunks=3)
    levels = {s.level for s in current_rolling(conversation)}
    assert max(s.last_seq for s in current_rolling(conversation)) == 80
    assert len(current_rolling(conversation)) <= policy.max_summaries_in_context
    assert max(levels) >= 1


def test_query_count_does_not_grow_with_history(
    tenant_a, member_a, policy, django_assert_max_num_queries
):
    small = make_conversation(tenant_a, member_a)
    add_messages(small, 16, user=member_a)
    with django_assert_max_num_queries(40) as few:
        summary_refresh(tenant_a.pk, small.pk, max_chunks=1)
    large = make_conversation(tenant_a, member_a)
    add_messages(large, 1500, user=member_a)
    with django_assert_max_num_queries(40) as many:
        summary_refresh(tenant_a.pk, large.pk, max_chunks=1)
    assert len(many.captured_queries) <= len(few.captured_queries) + 1
    (summary,) = current_rolling(large)
    assert (summary.first_seq, summary.last_seq) == (1, 10)


def test_merging_keeps_at_most_max_summaries_and_records_what_it_replaced(
    tenant_a, conversation, member_a, policy
):
    add_messages(conversation, 46, user=member_a)  # 40 pending: 4 chunks, max 3 in context
    summary_refresh(tenant_a.pk, conversation.pk)
    current = current_rolling(conversation)
    assert len(current) == 3
    merged = [s for s in current if s.level == 1]
    assert len(merged) == 1
    (top,) = merged
    assert (top.first_seq, top.last_seq) == (1, 20)
    replaced = summaries_of(conversation, merged_into=top)
    assert [(s.first_seq, s.last_seq, s.level) for s in replaced] == [(1, 10, 0), (11, 20, 0)]
    assert top.source_tokens == sum(s.source_tokens for s in replaced)
    assert top.token_count <= policy.summary_max_tokens
    # Covered ranges of the current summaries are contiguous and never overlap.
    ranges = sorted((s.first_seq, s.last_seq) for s in current)
    assert ranges == [(1, 20), (21, 30), (31, 40)]


def test_second_run_changes_nothing(tenant_a, conversation, member_a, policy):
    add_messages(conversation, 46, user=member_a)
    summary_refresh(tenant_a.pk, conversation.pk)
    before = db_snapshot()
    assert summary_refresh(tenant_a.pk, conversation.pk).status == "not_due"
    assert db_snapshot() == before


def test_token_trigger_summarises_before_the_interval(tenant_a, member_a):
    policy = make_policy(
        tenant_a,
        max_context_tokens=2000,
        reserved_response_tokens=500,
        system_budget=100,
        facts_budget=100,
        summaries_budget=300,
        retrieval_budget=100,
        summary_interval=50,
        summary_trigger_percent=50,
    )
    conversation = make_conversation(tenant_a, member_a)
    long_text = "The quarterly report for Porto lists 1,200 invoices and 45 open issues. " * 8
    add_messages(conversation, 14, user=member_a, texts=[long_text] * 14)
    state = rolling_state(fresh(conversation), policy)
    assert state.pending == 8 < policy.summary_interval
    assert state.by_tokens
    result = summary_refresh(tenant_a.pk, conversation.pk)
    assert result.status == "created"
    (summary,) = current_rolling(conversation)
    assert (summary.first_seq, summary.last_seq) == (1, 8)


def test_sliding_window_policies_get_no_rolling_summaries(tenant_a, member_a):
    make_policy(tenant_a, strategy="sliding_window", summaries_budget=0)
    conversation = make_conversation(tenant_a, member_a)
    add_messages(conversation, 40, user=member_a)
    assert summary_refresh(tenant_a.pk, conversation.pk).status == "disabled"


def test_another_tenants_conversation_is_not_found(tenant_a, tenant_b, member_b, policy):
    make_policy(tenant_b)
    other = make_conversation(tenant_b, member_b)
    add_messages(other, 40, user=member_b)
    before = db_snapshot()
    assert summary_refresh(tenant_a.pk, other.pk).status == "not_found"
    assert db_snapshot() == before


def test_streaming_messages_end_the_chunk(tenant_a, conversation, member_a, policy):
    add_messages(conversation, 26, user=member_a)
    with tenant_scope(tenant_a):
        Message.objects.filter(conversation=conversation, seq=5).update(status="streaming")
    summary_refresh(tenant_a.pk, conversation.pk)
    first = current_rolling(conversation)[0]
    assert first.last_seq == 4


def test_assembly_uses_the_summaries_and_raw_messages_after_them(
    tenant_a, conversation, member_a, policy
):
    add_messages(conversation, 36, user=member_a)
    summary_refresh(tenant_a.pk, conversation.pk)
    question, _ = message_create(
        conversation=conversation, role="user", content="What did we agree?", author=member_a
    )
    turn = assemble_turn(conversation, question, policy=policy)
    assert turn.prompt.system.count("<conversation_summary") == 3
    assert 'covers="messages 1-10' in turn.prompt.system
    seqs = [i.id for i in turn.prompt.included if i.kind == "message"]
    with tenant_scope(tenant_a):
        raw = set(Message.objects.filter(pk__in=seqs).values_list("seq", flat=True))
    assert raw and min(raw) > 30


def test_schedule_summary_if_needed_dispatches_after_commit(
    tenant_a, conversation, member_a, policy, django_capture_on_commit_callbacks, eager_celery
):
    add_messages(conversation, 10, user=member_a)
    assert schedule_summary_if_needed(conversation) is False  # 4 pending < 10
    add_messages(conversation, 10, user=member_a)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert schedule_summary_if_needed(conversation) is True
        assert schedule_summary_if_needed(conversation) is False  # deduplicated
    assert len(callbacks) == 1
    assert summaries_of(conversation) == []  # nothing before the commit
    callbacks[0]()
    assert [(s.first_seq, s.last_seq) for s in current_rolling(conversation)] == [(1, 10)]
