"""Rolling summaries follow the conversation's sessions: a chunk never spans a pause longer
than the policy's gap, merges take whole sessions where they can, the current summaries
cover the conversation without a gap, and the work stays bounded."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn
from chats.services import message_create
from summaries.scheduling import schedule_summary_if_needed
from summaries.selectors import summaries_for
from summaries.services import rolling_state, summary_refresh
from tests.factories import make_conversation
from tests.summaries.helpers import add_messages, current_rolling, make_policy, summaries_of

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


@pytest.fixture
def policy(tenant_a):
    # raw window 6, interval 10, at most 3 summaries in context; sessions break after 3 h
    return make_policy(tenant_a, summary_session_gap_minutes=180)


def fresh(conversation):
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def sessions(conversation, member, sizes, *, start):
    """Append a session of each size, a day apart, the last one at ``start + n - 1 days``;
    each session's messages a minute apart."""
    for day, size in enumerate(sizes):
        times = [start + day * DAY + timedelta(minutes=i) for i in range(size)]
        add_messages(conversation, size, user=member, created_at=times)


def level_zero(conversation):
    return [(s.first_seq, s.last_seq) for s in summaries_of(conversation, level=0)]


def test_chunks_end_at_the_pauses_and_split_long_sessions_by_the_interval(
    tenant_a, conversation, member_a, policy
):
    now = timezone.now()
    start = now - 2 * DAY
    # Sessions 1-4, 5-29 and 30-37 (today, still going); 31 of the 37 may be summarised.
    sessions(conversation, member_a, [4, 25, 8], start=start)
    result = summary_refresh(tenant_a.pk, conversation.pk, now=now + timedelta(minutes=10))
    assert result.status == "created" and not result.more
    # The short first session is a chunk of its own; the second splits by the interval and
    # its rest ends at its last message. Today's session is not over: 30-31 wait.
    assert level_zero(conversation) == [(1, 4), (5, 14), (15, 24), (25, 29)]
    for summary in summaries_of(conversation, level=0):
        assert summary.period_start is not None and summary.period_end is not None
        assert summary.period_end - summary.period_start < timedelta(hours=3)
    assert rolling_state(fresh(conversation), policy, now=now).covered_upto == 29

    # Once the conversation has been quiet for longer than the gap, today's session is over:
    # what may be summarised of it (30-31; the newest six stay raw) becomes a chunk.
    later = now + timedelta(hours=4)
    assert summary_refresh(tenant_a.pk, conversation.pk, now=later).status == "created"
    assert level_zero(conversation)[-1] == (30, 31)


def test_a_completed_short_session_is_due_and_a_running_one_is_not(
    tenant_a, conversation, member_a, policy
):
    now = timezone.now()
    sessions(conversation, member_a, [3, 8], start=now - DAY)
    state = rolling_state(fresh(conversation), policy, now=now)
    # 5 may be summarised, fewer than the interval, but 1-3 are a session that ended.
    assert state.pending == 5 and not state.by_count and not state.by_tokens
    assert state.due and state.session_end == 3

    other = make_conversation(tenant_a, member_a)
    sessions(other, member_a, [11], start=now - timedelta(minutes=20))
    running = rolling_state(fresh(other), policy, now=now)
    assert running.pending == 5 and not running.due
    assert summary_refresh(tenant_a.pk, other.pk, now=now).status == "not_due"


def test_a_turn_after_a_pause_schedules_the_summary_of_the_session_before_it(
    tenant_a, conversation, member_a, policy, django_capture_on_commit_callbacks, eager_celery
):
    now = timezone.now()
    sessions(conversation, member_a, [5], start=now - DAY)
    add_messages(conversation, 3, user=member_a)  # today: the newest six stay raw
    assert rolling_state(fresh(conversation), policy).session_end is None  # 3-5 are raw
    add_messages(conversation, 3, user=member_a)  # yesterday's session is summarisable now
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert schedule_summary_if_needed(conversation) is True
    callbacks[0]()
    assert level_zero(conversation) == [(1, 5)]  # five, not the interval's ten


def test_a_session_becomes_one_summary_and_merges_take_whole_sessions(
    tenant_a, conversation, member_a, policy
):
    now = timezone.now()
    # Sessions 1-3, 4-23 (two chunks), 24-26, and today's 27-33 (still going).
    sessions(conversation, member_a, [3, 20, 3, 7], start=now - 3 * DAY)
    summary_refresh(tenant_a.pk, conversation.pk, now=now)
    assert level_zero(conversation) == [(1, 3), (4, 13), (14, 23), (24, 26)]
    current = current_rolling(conversation)
    # Once the pause after it shows the second session complete, its chunks become one
    # summary of the session.
    assert [(s.first_seq, s.last_seq, s.level) for s in current] == [
        (1, 3, 0),
        (4, 23, 1),
        (24, 26, 0),
    ]
    session = current[1]
    assert [(s.first_seq, s.last_seq) for s in summaries_of(conversation, merged_into=session)] == [
        (4, 13),
        (14, 23),
    ]
    assert session.period_start == summaries_of(conversation, level=0)[1].period_start
    assert session.period_end == summaries_of(conversation, level=0)[2].period_end


def test_summaries_of_summaries_take_whole_sessions(tenant_a, conversation, member_a, policy):
    now = timezone.now()
    # Sessions 1-3, 4-23, 24-26, 27-38 and today's 39-45 (still going).
    sessions(conversation, member_a, [3, 20, 3, 12, 7], start=now - 4 * DAY)
    while summary_refresh(tenant_a.pk, conversation.pk, now=now).more:
        pass
    current = current_rolling(conversation)
    assert [(s.first_seq, s.last_seq, s.level) for s in current] == [
        (1, 26, 3),
        (27, 36, 0),
        (37, 38, 0),
    ]

    def sources(summary):
        return [
            (s.first_seq, s.last_seq, s.level)
            for s in summaries_of(conversation, merged_into=summary)
        ]

    top = current[0]
    # Each merge took whole sessions: 1-23 (the first two), then the third.
    assert sources(top) == [(1, 23, 2), (24, 26, 0)]
    (first_two,) = summaries_of(conversation, first_seq=1, last_seq=23)
    assert sources(first_two) == [(1, 3, 0), (4, 23, 1)]
    (second,) = summaries_of(conversation, first_seq=4, last_seq=23)
    assert sources(second) == [(4, 13, 0), (14, 23, 0)]


def test_merging_every_chunk_keeps_the_span_covered_up_to_the_raw_history(
    tenant_a, conversation, member_a, policy
):
    now = timezone.now()
    sizes = [2, 5, 12, 1, 9, 30, 4, 3, 16, 6]
    sessions(conversation, member_a, sizes, start=now - 10 * DAY)
    later = now + DAY  # every session is over
    while summary_refresh(tenant_a.pk, conversation.pk, now=later).more:
        pass
    current = current_rolling(conversation)
    assert len(current) <= policy.max_summaries_in_context
    assert max(s.level for s in current) >= 2  # summaries of summaries of summaries
    ranges = [(s.first_seq, s.last_seq) for s in current]
    assert ranges[0][0] == 1
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
    assert ranges[-1][1] == sum(sizes) - policy.raw_history_limit
    # The prompt shows them all: from message 1 to the raw history, without a gap.
    question, _ = message_create(
        conversation=conversation, role="user", content="Sum up everything?", author=member_a
    )
    turn = assemble_turn(conversation, question, policy=policy)
    shown = sorted(
        (s.first_seq, s.last_seq) for s in turn.summaries if s.id in turn.prompt.summary_ids
    )
    assert shown == ranges
    # Each merged summary lists its sources, which cover exactly its own range.
    for info in summaries_for(conversation, include_history=True):
        if info.level:
            assert info.sources[0].first_seq == info.first_seq
            assert info.sources[-1].last_seq == info.last_seq
            assert {s.id for s in info.sources} == set(info.replaced_ids)
            assert all(
                b.first_seq == a.last_seq + 1
                for a, b in zip(info.sources, info.sources[1:], strict=False)
            )


def test_finding_the_next_chunk_is_one_bounded_range_query(
    tenant_a, member_a, policy, django_assert_max_num_queries
):
    now = timezone.now()
    large = make_conversation(tenant_a, member_a)
    sessions(large, member_a, [3, 1200], start=now - DAY)
    conversation = fresh(large)
    with django_assert_max_num_queries(3) as captured:
        state = rolling_state(conversation, policy, now=now)
    assert state.session_end == 3
    ranged = [q["sql"] for q in captured.captured_queries if "created_at" in q["sql"]]
    assert ranged and all("LIMIT 11" in sql for sql in ranged)
