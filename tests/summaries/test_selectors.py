"""summaries_for: what each summary covers, for the admin and the API."""

from __future__ import annotations

import pytest

from summaries.models import Summary
from summaries.selectors import summaries_for, summary_get
from summaries.services import summary_refresh
from tests.factories import make_conversation
from tests.summaries.helpers import add_messages, make_policy

pytestmark = pytest.mark.django_db


def test_summaries_for_lists_ranges_and_what_was_replaced(tenant_a, member_a):
    make_policy(tenant_a)
    conversation = make_conversation(tenant_a, member_a)
    add_messages(conversation, 46, user=member_a)
    summary_refresh(tenant_a.pk, conversation.pk)
    current = summaries_for(conversation)
    assert [(s.first_seq, s.last_seq, s.level) for s in current] == [
        (1, 20, 1),
        (21, 30, 0),
        (31, 40, 0),
    ]
    merged = current[0]
    assert merged.is_current and len(merged.replaced_ids) == 2
    assert merged.messages_covered == 20 and merged.compression_ratio > 1
    everything = summaries_for(conversation, include_history=True)
    assert len(everything) == 5
    assert {s.merged_into_id for s in everything if not s.is_current} == {merged.id}


def test_summary_of_another_tenant_is_not_found(tenant_a, tenant_b, member_a, member_b):
    make_policy(tenant_a)
    make_policy(tenant_b)
    mine = make_conversation(tenant_a, member_a)
    theirs = make_conversation(tenant_b, member_b)
    add_messages(theirs, 20, user=member_b)
    summary_refresh(tenant_b.pk, theirs.pk)
    (their_summary,) = summaries_for(theirs)
    with pytest.raises(Summary.DoesNotExist):
        summary_get(mine, their_summary.id)
    assert summaries_for(mine) == []
