"""Facts that change: a newer value of a fact's subject (its key) supersedes the older one
with the times of the world (true from when it was said until the newer value was said)
beside the record's; a prompt keeps only the current value in its cached block and, on a
turn whose message concerns the fact, says that it changed, since when and from what."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.service import assemble_turn
from memory.selectors import fact_history
from memory.services import fact_save, fact_save_detailed, fact_update
from tests.api.helpers import add_message
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db

MARCH = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MAY = datetime(2026, 5, 20, 9, 30, tzinfo=UTC)


def said(conversation, user, text, when):
    message = add_message(conversation, user, text)
    with tenant_scope(conversation.tenant_id):
        Message.objects.filter(pk=message.pk).update(created_at=when)
    return message


def test_a_new_value_ends_the_old_one_when_it_was_said(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    paris = said(conversation, member_a, "I live in Paris", MARCH)
    lyon = said(conversation, member_a, "I moved to Lyon", MAY)
    old = fact_save(tenant_a, member_a, "Lives in Paris", key="home_city", source_message=paris)
    saved = fact_save_detailed(
        tenant_a, member_a, "Lives in Lyon", key="home_city", source_message=lyon
    )
    assert saved.replaced is not None and saved.replaced.pk == old.pk
    assert old.valid_from == MARCH
    assert saved.fact.valid_from == MAY and saved.replaced.valid_until == MAY
    [current, earlier] = fact_history(tenant_a, member_a, key="home_city")
    assert (current.valid_until, earlier.valid_until) == (None, MAY)
    assert earlier.superseded_at is not None and earlier.superseded_at > MAY  # the record's time


def test_an_edit_corrects_the_record_and_is_no_change_in_the_world(tenant_a, member_a):
    typo = fact_save(tenant_a, member_a, "Lives in Lyonn", key="home_city")
    fixed = fact_update(tenant_a, member_a, typo.pk, "Lives in Lyon")
    assert fixed.valid_from == typo.valid_from
    [_, earlier] = fact_history(tenant_a, member_a, key="home_city")
    assert earlier.valid_until is None
    conversation = make_conversation(tenant_a, member_a)
    prompt = assemble_turn(conversation, add_message(conversation, member_a, "Lyon?")).prompt
    assert "<fact_changes>" not in prompt.tail


def test_a_turn_that_concerns_a_changed_fact_is_told_of_the_change(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    paris = said(conversation, member_a, "I live in Paris", MARCH)
    lyon = said(conversation, member_a, "I moved to Lyon", MAY)
    fact_save(tenant_a, member_a, "Lives in Paris", key="home_city", source_message=paris)
    fact_save(tenant_a, member_a, "Lives in Lyon", key="home_city", source_message=lyon)
    fact_save(tenant_a, member_a, "Has a cat named Miso", key="pet")

    touching = assemble_turn(
        conversation, add_message(conversation, member_a, "Which city do I live in?")
    ).prompt
    assert "<fact_changes>" in touching.tail
    assert "home city: now: Lives in Lyon (since 2026-05-20); before: Lives in Paris" in (
        touching.tail
    )
    assert "Lives in Lyon" in touching.system and "Lives in Paris" not in touching.system

    other = assemble_turn(
        conversation, add_message(conversation, member_a, "Recipe ideas for my cat Miso?")
    ).prompt
    assert "<fact_changes>" not in other.tail
    # The cached block is the same whatever the question: only the tail differs.
    facts_block = touching.system[touching.system.index("<user_facts>") :]
    assert facts_block == other.system[other.system.index("<user_facts>") :]
