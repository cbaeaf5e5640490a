"""From a new message to RetrievedItem candidates, and into the assembled prompt."""

from __future__ import annotations

import pytest

from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.assembly import assemble_turn
from chats.retrieval import RetrievalSettings, retrieve_for_assembly, retrieve_messages
from chats.services import conversation_create, message_create
from tests.factories import make_policy

from .conftest import add

pytestmark = pytest.mark.django_db


def filler(conversation, author, n, start=0):
    texts = [f"Small talk number {i}: the weather is fine, see you soon." for i in range(n)]
    return add(conversation, author, *[t for t in texts[start:]])


def fresh(conversation):
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def test_relevant_message_comes_first_with_its_neighbours(conversation, member_a):
    filler(conversation, member_a, 10)
    (question,) = add(conversation, member_a, "What did you cook for the party?")
    (answer,) = add(conversation, None, "A huge paella with saffron.", role="assistant")
    (after,) = filler(conversation, member_a, 1)
    filler(conversation, member_a, 10)
    items = retrieve_messages(fresh(conversation), "Remind me about the paella recipe")
    assert items[0].message.id == answer.pk
    assert items[0].message.author == "Assistant"
    assert items[0].message.tokens is not None and items[0].message.counted_by == "o200k_base"
    assert question.pk in {n.id for n in items[0].neighbors}
    # The turns around the hit follow it in the ranking (they inherit part of its score).
    assert {i.message.id for i in items[1:3]} == {question.pk, after.pk}


def test_bounded_queries_and_limits(conversation, member_a, django_assert_max_num_queries):
    messages = filler(conversation, member_a, 40)
    conversation = fresh(conversation)
    # The search, the rows, the replaced facts' statements, the neighbours.
    with django_assert_max_num_queries(4):
        items = retrieve_messages(
            conversation,
            "weather",
            before_seq=messages[20].seq,
            settings=RetrievalSettings(candidates=10, neighbor_hits=3, max_items=7),
        )
    assert len(items) == 7
    assert all(i.message.seq < messages[20].seq for i in items)
    with django_assert_max_num_queries(0):
        assert retrieve_messages(conversation, "the and of ?!") == []


def test_failed_and_streaming_messages_are_not_retrieved(conversation, member_a):
    (done,) = add(conversation, member_a, "Bananas are yellow.")
    message_create(conversation=conversation, role="assistant", content="Bananas!", status="failed")
    items = retrieve_messages(fresh(conversation), "bananas")
    assert [i.message.id for i in items] == [done.pk]


def test_other_tenants_messages_never_come_back(conversation, member_a, tenant_b, member_b):
    add(conversation, member_a, "Our office is in Porto.")
    foreign = conversation_create(tenant=tenant_b, created_by=member_b)
    add(foreign, member_b, *["Porto Porto office Porto"] * 5)
    items = retrieve_messages(fresh(conversation), "Where is the office? Porto?")
    with tenant_scope(conversation.tenant_id):
        ours = set(Message.objects.filter(conversation=conversation).values_list("id", flat=True))
    assert items and {i.message.id for i in items} <= ours


def test_hybrid_assembly_retrieves_an_old_message(conversation, member_a, tenant_a):
    policy = make_policy(
        tenant_a,
        name="hybrid small",
        strategy="hybrid",
        max_context_tokens=2000,
        reserved_response_tokens=500,
        system_budget=300,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=600,
        min_recent_messages=2,
        recent_message_cap=10,
        retrieval_max_items=20,
    )
    add(conversation, member_a, "My locker code is 4711, do not forget it.")
    filler(conversation, member_a, 60)
    (new,) = add(conversation, member_a, "What was my locker code again?")
    turn = assemble_turn(conversation, new, policy=policy)
    assert "My locker code is 4711" in turn.prompt.system
    retrieval = turn.prompt.section("retrieval")
    assert retrieval is not None and retrieval.items >= 1
    assert turn.retrieved_ids


def test_retrieve_for_assembly_honours_policy_and_before_seq(conversation, member_a, tenant_a):
    old = add(conversation, member_a, "The spare key is under the blue flowerpot.")
    newer = add(conversation, member_a, "The flowerpot broke yesterday.")
    with all_tenants():
        policy = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid")
    from chatplatform.core.context.types import MessageItem

    item = MessageItem("new", newer[0].seq + 1, "user", "Where is the key? flowerpot")
    items = retrieve_for_assembly(fresh(conversation), item, policy, newer[0].seq)
    assert [i.message.id for i in items] == [old[0].pk]


def test_hybrid_preset_retrieves_up_to_200_items_with_ranked_neighbours():
    with all_tenants():
        preset = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid")
    assert preset.retrieval_max_items == 200 and preset.retrieval_neighbors == 0
