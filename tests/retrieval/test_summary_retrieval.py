"""Retrieval over summaries: indexed search, exclusions, and into the assembled prompt."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from chatplatform.core.context.types import MessageItem
from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn
from chats.retrieval.query import build_query
from chats.retrieval.retriever import (
    RetrievalSettings,
    retrieve_for_assembly,
    retrieve_summaries,
    shown_summary_ids,
)
from chats.retrieval.search import search_summaries
from chats.services import conversation_create
from tests.factories import make_policy, summary

from .conftest import add

pytestmark = pytest.mark.django_db


def fresh(conversation):
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def test_search_finds_summaries_by_terms_and_skips_excluded_and_superseded(conversation):
    sailing = summary(conversation, 1, 10, "They planned a sailing trip to the Azores.")
    summary(conversation, 11, 20, "They talked about the garden and tomatoes.")
    summary(conversation, 21, 30, "Sailing lessons were booked.", superseded_at=timezone.now())
    query = build_query("When is the sailing trip?")
    hits = search_summaries(
        tenant_id=conversation.tenant_id, conversation_id=conversation.pk, query=query, limit=5
    )
    assert [h.summary_id for h in hits] == [sailing.pk]
    assert not search_summaries(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        query=query,
        limit=5,
        exclude_ids=[sailing.pk],
    )


def test_other_tenants_summaries_never_come_back(conversation, tenant_b, member_b):
    foreign = conversation_create(tenant=tenant_b, created_by=member_b)
    summary(foreign, 1, 5, "Secret sailing plans of tenant B, sailing sailing.")
    assert retrieve_summaries(fresh(conversation), "sailing plans") == []


def test_retrieved_summary_carries_its_range_time_and_score(conversation):
    row = summary(conversation, 3, 9, "The team chose Lisbon for the offsite.")
    (item,) = retrieve_summaries(fresh(conversation), "Where is the offsite?")
    assert item.message.id == f"summary:{row.pk}" and item.message.seq == 9
    assert item.message.author == "summary of messages 3-9"
    assert item.message.created_at == datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
    assert item.score > 0 and item.message.tokens == row.token_count


def test_summaries_the_assembly_shows_are_not_retrieved(conversation):
    old = summary(conversation, 1, 10, "Offsite in Lisbon was decided.")
    newest = summary(conversation, 11, 20, "Offsite budget approved.")
    shown = shown_summary_ids(fresh(conversation), max_rolling=1)
    assert shown == {newest.pk}
    items = retrieve_summaries(
        fresh(conversation), "offsite", exclude_ids=shown, settings=RetrievalSettings()
    )
    assert [i.message.id for i in items] == [f"summary:{old.pk}"]


def test_hybrid_prompt_holds_a_relevant_older_summary_once(conversation, member_a, tenant_a):
    policy = make_policy(
        tenant_a,
        name="hybrid with summaries",
        strategy="hybrid",
        max_context_tokens=3000,
        reserved_response_tokens=500,
        system_budget=300,
        facts_budget=0,
        summaries_budget=400,
        retrieval_budget=800,
        min_recent_messages=2,
        recent_message_cap=10,
        max_summaries_in_context=1,
        retrieval_max_items=50,
        retrieval_neighbors=0,
    )
    add(conversation, member_a, *[f"Small talk {i} about nothing much." for i in range(30)])
    old = summary(conversation, 1, 10, "Dana's allergy: peanuts; the EpiPen is in the red bag.")
    summary(conversation, 11, 20, "They discussed football results.")
    (new,) = add(conversation, member_a, "Which allergy does Dana have?")
    item = MessageItem("q", new.seq, "user", new.content)
    found = retrieve_for_assembly(fresh(conversation), item, policy, new.seq)
    assert f"summary:{old.pk}" in {r.message.id for r in found}
    turn = assemble_turn(conversation, new, policy=policy)
    system = turn.prompt.system
    assert system.count("EpiPen is in the red bag") == 1
    assert "summary of messages 1-10: Dana" in system
    assert "[2024-03-01 12:00]" in system
    assert turn.prompt.prompt_tokens <= turn.prompt.budget
