"""A conversation being continued gets a summary of its whole history."""

from __future__ import annotations

import pytest

from chats.assembly import assemble_turn
from chats.services import message_create
from summaries.scheduling import schedule_continuation_summary
from summaries.services import continuation_summary_ensure
from tests.factories import make_conversation
from tests.summaries.helpers import (
    add_messages,
    current_rolling,
    db_snapshot,
    make_policy,
    summaries_of,
)

pytestmark = pytest.mark.django_db


def test_whole_history_is_summarised_in_bounded_runs_into_one_summary(
    tenant_a, member_a, django_capture_on_commit_callbacks
):
    policy = make_policy(tenant_a, strategy="hybrid")
    old = make_conversation(tenant_a, member_a, title="Old")
    add_messages(old, 950, user=member_a)
    new = make_conversation(tenant_a, member_a, title="New", continues=old)
    with django_capture_on_commit_callbacks() as callbacks:
        assert schedule_continuation_summary(new) is True
    assert len(callbacks) == 1

    runs = 0
    result = continuation_summary_ensure(tenant_a.pk, old.pk, max_chunks=2)
    while result.more:
        assert len(result.created) <= 2
        runs += 1
        result = continuation_summary_ensure(tenant_a.pk, old.pk, max_chunks=2)
    assert runs >= 2
    (summary,) = current_rolling(old)
    assert (summary.first_seq, summary.last_seq) == (1, 950)
    assert summary.level >= 1 and summary.token_count <= policy.summary_max_tokens
    assert len(summaries_of(old)) > 1  # the chunks stay as history (merged_into)

    question, _ = message_create(
        conversation=new, role="user", content="Where were we?", author=member_a
    )
    turn = assemble_turn(new, question, policy=policy)
    assert 'kind="earlier conversation"' in turn.prompt.system

    before = db_snapshot()
    assert continuation_summary_ensure(tenant_a.pk, old.pk).status == "not_due"
    assert schedule_continuation_summary(new) is False
    assert db_snapshot() == before


def test_cross_tenant_continuation_finds_nothing(tenant_a, tenant_b, member_b):
    make_policy(tenant_b)
    other = make_conversation(tenant_b, member_b)
    add_messages(other, 30, user=member_b)
    before = db_snapshot()
    assert continuation_summary_ensure(tenant_a.pk, other.pk).status == "not_found"
    assert db_snapshot() == before
