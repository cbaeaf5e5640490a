"""A fact's statements are retrieved together, the latest first.

When a fact saved from one message is replaced by a value said in a later one, a question
that matches only the earlier statement also brings the later one (ranked before it, so the
current value is what a prompt short of room keeps), and one that matches only the later
brings the earlier (both sides of the change). A chain of values reaches its latest. Pairs
are the conversation's own: a value said in another conversation is not brought in."""

from __future__ import annotations

import pytest

from chats.retrieval import RetrievalSettings, retrieve_messages
from memory.selectors import replaced_statements
from memory.services import fact_save
from tests.factories import make_conversation

from .conftest import add
from .test_retriever import filler, fresh

pytestmark = pytest.mark.django_db

FIRST = "The dashboard endpoint takes about 900 ms to answer at the moment."
SECOND = "Good news: after the caching tweaks it is down to 400 ms."
THIRD = "Latest measurement after the index change: 250 ms on average."


def story(conversation, member, tenant, *, values=(FIRST, SECOND)):
    """Filler around the statements of one keyed fact, each replacing the one before."""
    said = []
    for text in values:
        filler(conversation, member, 15)
        (message,) = add(conversation, member, text)
        fact_save(tenant, member, text, key="dashboard_latency", source_message=message)
        said.append(message)
    filler(conversation, member, 15)
    return said


def ids(items):
    return [i.message.id for i in items]


def found(conversation, question, *, max_items=4, before_seq=None):
    """The ids retrieval returns for ``question``, best first."""
    settings = RetrievalSettings(max_items=max_items, neighbor_hits=5)
    items = retrieve_messages(
        fresh(conversation), question, before_seq=before_seq, settings=settings
    )
    return ids(items)


def test_the_newer_statement_comes_with_the_older_and_before_it(conversation, member_a, tenant_a):
    first, second = story(conversation, member_a, tenant_a)
    items = retrieve_messages(
        fresh(conversation),
        "How slow is the dashboard endpoint?",
        settings=RetrievalSettings(max_items=4, neighbor_hits=5),
    )
    found = ids(items)
    assert first.pk in found and second.pk in found
    assert found.index(second.pk) < found.index(first.pk)
    # Shown whole: a statement is not a reply found through its exchange.
    assert not next(i for i in items if i.message.id == second.pk).excerpt


def test_without_the_fact_the_newer_statement_is_not_found(conversation, member_a, tenant_a):
    filler(conversation, member_a, 15)
    (first,) = add(conversation, member_a, FIRST)
    filler(conversation, member_a, 15)
    (second,) = add(conversation, member_a, SECOND)
    filler(conversation, member_a, 15)
    order = found(conversation, "How slow is the dashboard endpoint?")
    assert first.pk in order and second.pk not in order


def test_the_older_statement_comes_with_the_newer(conversation, member_a, tenant_a):
    first, second = story(conversation, member_a, tenant_a)
    order = found(conversation, "What did the caching tweaks give?")
    assert order.index(second.pk) < order.index(first.pk)


def test_a_chain_of_values_reaches_its_latest(conversation, member_a, tenant_a):
    first, second, third = story(conversation, member_a, tenant_a, values=(FIRST, SECOND, THIRD))
    assert replaced_statements(tenant_a, conversation, [first.pk]) == [
        (first.pk, second.pk),
        (second.pk, third.pk),
    ]
    order = found(conversation, "How slow is the dashboard endpoint?", max_items=6)
    assert order.index(third.pk) < order.index(first.pk)
    assert second.pk in order


def test_a_value_said_in_another_conversation_is_not_brought(conversation, member_a, tenant_a):
    filler(conversation, member_a, 15)
    (first,) = add(conversation, member_a, FIRST)
    fact_save(tenant_a, member_a, FIRST, key="dashboard_latency", source_message=first)
    other = make_conversation(tenant_a, member_a)
    (elsewhere,) = add(other, member_a, SECOND)
    fact_save(tenant_a, member_a, SECOND, key="dashboard_latency", source_message=elsewhere)
    assert replaced_statements(tenant_a, conversation, [first.pk]) == []
    assert replaced_statements(tenant_a, other, [elsewhere.pk]) == []


def test_a_statement_after_the_turn_is_not_brought(conversation, member_a, tenant_a):
    first, second = story(conversation, member_a, tenant_a)
    order = found(conversation, "How slow is the dashboard endpoint?", before_seq=second.seq)
    assert first.pk in order and second.pk not in order
