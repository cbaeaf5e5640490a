"""Which summaries the jobs make follows what the policy's strategy shows: a server-compaction
policy's prompts only ever show the provider's compaction, so no rolling or periodic summaries
are made for it (though it keeps the default summaries budget, which holds the compaction),
while its compactions are still stored and sent back."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn
from chats.services import message_create
from summaries.scheduling import schedule_summary_if_needed
from summaries.selectors import latest_compaction
from summaries.services import periodic_due_batch, periodic_summary_refresh, summary_refresh
from summaries.services.compaction import ProviderCompaction, compaction_store
from summaries.services.periodic import periodic_enabled
from summaries.services.rolling import uses_summaries
from tests.factories import make_conversation
from tests.summaries.helpers import add_messages, make_policy, summaries_of

pytestmark = pytest.mark.django_db


def long_conversation(tenant, user, strategy):
    """A policy of ``strategy`` (the summaries budget and periodic summaries as the others
    have them) and a conversation whose rolling and periodic summaries would be due."""
    policy = make_policy(tenant, strategy=strategy, periodic_summaries_enabled=True)
    conversation = make_conversation(tenant, user)
    now = timezone.now()
    times = [now - timedelta(days=3, minutes=40 - i) for i in range(40)]
    add_messages(conversation, 40, user=user, created_at=times)
    with tenant_scope(tenant):
        conversation = Conversation.objects.get(pk=conversation.pk)
    return policy, conversation


def test_a_summary_strategy_gets_rolling_and_periodic_summaries(tenant_a, member_a):
    """The comparison: the same conversation under the rolling summary strategy."""
    policy, conversation = long_conversation(tenant_a, member_a, "rolling_summary")
    assert uses_summaries(policy) and periodic_enabled(policy)
    assert schedule_summary_if_needed(conversation)
    due = periodic_due_batch(after_id=conversation.pk - 1, batch_size=10).periodic
    assert [c for _, c, _ in due] == [conversation.pk]
    assert summary_refresh(tenant_a.pk, conversation.pk).status == "created"


def test_server_compaction_gets_no_rolling_or_periodic_summaries(tenant_a, member_a):
    policy, conversation = long_conversation(tenant_a, member_a, "server_compaction")
    assert policy.summaries_budget > 0 and policy.periodic_summaries_enabled
    assert not uses_summaries(policy)
    assert not periodic_enabled(policy)
    assert not schedule_summary_if_needed(conversation)
    assert periodic_due_batch(after_id=conversation.pk - 1, batch_size=10).periodic == []
    assert summary_refresh(tenant_a.pk, conversation.pk).status == "disabled"
    assert periodic_summary_refresh(tenant_a.pk, conversation.pk).status == "disabled"
    assert summaries_of(conversation) == []


def test_server_compaction_still_stores_and_sends_the_providers_compaction(tenant_a, member_a):
    _, conversation = long_conversation(tenant_a, member_a, "server_compaction")
    stored = compaction_store(
        conversation,
        ProviderCompaction(
            content="The team planned the harbour festival.",
            encrypted_content=None,
            signature=None,
            first_seq=1,
            last_seq=30,
            source_tokens=900,
            tokens=8,
            counter="o200k_base",
            model="claude-test",
            cost_usd=Decimal("0.001"),
            usage={"input_tokens": 900, "output_tokens": 8},
        ),
    )
    assert stored is not None and stored.kind == "compaction"
    found = latest_compaction(conversation)
    assert found is not None and found[0].id == stored.pk
    with tenant_scope(tenant_a):
        message, _ = message_create(
            conversation=conversation, role="user", content="And the ferries?", author=member_a
        )
    prepared = assemble_turn(conversation, message)
    assert prepared.prompt.summary_ids == [stored.pk]
    # Only the messages after the compaction follow it.
    history = {i.id for i in prepared.prompt.included if i.kind == "message"}
    with tenant_scope(tenant_a):
        seqs = set(Message.objects.filter(pk__in=history).values_list("seq", flat=True))
    assert seqs and min(seqs) > 30
    assert [s.kind for s in summaries_of(conversation)] == ["compaction"]
