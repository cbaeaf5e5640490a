"""Standing instructions and preferences: noticed in the user's own messages when they are
stored, kept in the user's words linked to the message, replaced by a later one on the same
matter (kept in history), bounded by the policy, and sent in every prompt of that user in a
section of their own, in the cached prefix, until replaced."""

from __future__ import annotations

import pytest

from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.service import assemble_turn
from chats.services.revisions import user_message_edit
from memory.models import FactEnd, UserFact
from memory.selectors import fact_history
from memory.services import (
    WHOLE_MESSAGE_CHARS,
    FactRejected,
    fact_save,
    fact_save_detailed,
    instructions_capture,
)
from tests.api.conftest import API, key_client
from tests.api.helpers import add_message
from tests.factories import make_conversation, make_member, make_message
from tests.summaries.helpers import make_policy

pytestmark = pytest.mark.django_db

SPANISH = "From now on, always answer me in Spanish."
NUMBERS = "Please always include version numbers when I ask about libraries."


def standing(tenant, user):
    with tenant_scope(tenant):
        return list(
            UserFact.objects.filter(
                user=user, superseded_at__isnull=True, kind__in=["instruction", "preference"]
            ).order_by("created_at")
        )


def test_a_message_that_states_one_is_kept_whole_and_linked(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    text = f"Thanks, that helped. {NUMBERS} Now, how do I pin requests?"
    message = add_message(conversation, member_a, text)
    [saved] = instructions_capture(tenant_a, message)
    assert saved.created and saved.fact.kind == "instruction"
    assert saved.fact.text == text and saved.fact.source_message_id == message.pk
    assert instructions_capture(tenant_a, message)[0].created is False  # idempotent


def test_a_long_message_keeps_only_the_sentences_that_state_them(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    paste = "x = 1\n" * (WHOLE_MESSAGE_CHARS // 4)
    text = f"Here is my code:\n{paste}\nI prefer type hints everywhere. {NUMBERS}"
    message = add_message(conversation, member_a, text)
    kept = {(s.fact.kind, s.fact.text) for s in instructions_capture(tenant_a, message)}
    assert kept == {("preference", "I prefer type hints everywhere."), ("instruction", NUMBERS)}


def test_a_run_on_message_keeps_the_clause_that_states_it(tenant_a, member_a):
    # One sentence of thousands of characters: the memory is the clause, verbatim and closed
    # as a sentence of its own, and the same matter said again in a later run-on message
    # replaces it.
    conversation = make_conversation(tenant_a, member_a)
    filler = ", and I've planned the sprint for the login page with its tests"
    said = "I prefer simple, minimal dependencies to keep the app lightweight and easy to maintain"
    text = "I've set up the Flask app" + filler * 12 + ", and " + said + filler * 12
    [saved] = instructions_capture(tenant_a, add_message(conversation, member_a, text))
    assert (saved.fact.kind, saved.fact.text) == ("preference", f"and {said}.")
    again = said.replace("easy to maintain", "quick to build")
    text = "My budget app runs" + filler * 12 + ", and " + again + filler * 12
    [later] = instructions_capture(tenant_a, add_message(conversation, member_a, text))
    assert later.created and later.fact.text == f"and {again}."
    assert [f.pk for f in standing(tenant_a, member_a)] == [later.fact.pk]


def test_nothing_is_kept_from_ordinary_messages_or_replies(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    for text in ("I always forget my keys.", "Which do you prefer, tabs or spaces?", "Hi!"):
        assert instructions_capture(tenant_a, add_message(conversation, member_a, text)) == []
    reply = make_message(conversation, "I will always answer in English.", role="assistant")
    assert instructions_capture(tenant_a, reply) == []
    assert standing(tenant_a, member_a) == []


def test_a_later_one_on_the_same_matter_replaces_the_earlier(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    first = add_message(conversation, member_a, SPANISH)
    instructions_capture(tenant_a, first)
    instructions_capture(tenant_a, add_message(conversation, member_a, NUMBERS))
    later = add_message(conversation, member_a, "From now on, always answer me in German.")
    [saved] = instructions_capture(tenant_a, later)
    assert saved.replaced is not None and saved.replaced.text == SPANISH
    assert [f.text for f in standing(tenant_a, member_a)] == [NUMBERS, later.content]
    history = fact_history(tenant_a, member_a, fact_id=saved.fact.pk)
    assert [f.text for f in history] == [later.content, SPANISH]
    assert history[1].ended_reason == FactEnd.REPLACED


def test_a_message_that_only_points_back_to_a_kept_preference_adds_none(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    stated = add_message(conversation, member_a, "I prefer a modular design for the detector.")
    [kept] = instructions_capture(tenant_a, stated)
    later = add_message(
        conversation, member_a, "Write the class, considering my preference for modular design?"
    )
    [again] = instructions_capture(tenant_a, later)
    assert again.created is False and again.fact.pk == kept.fact.pk
    # The first mention of a preference is kept, even when worded as a reference.
    first = add_message(conversation, member_a, "Help me, given my preference for dark themes.")
    [new] = instructions_capture(tenant_a, first)
    assert new.created and new.fact.source_message_id == first.pk
    assert [f.text for f in standing(tenant_a, member_a)] == [stated.content, first.content]


def test_facts_and_instructions_have_their_own_limits(tenant_a, member_a):
    make_policy(tenant_a, max_facts_per_user=10, max_instructions_per_user=2)
    for i in range(12):
        fact_save(tenant_a, member_a, f"Fact {i}")
    for topic in ("emojis", "headings", "tables"):
        fact_save(tenant_a, member_a, f"Never use {topic} in answers.", kind="instruction")
    assert [f.text for f in standing(tenant_a, member_a)] == [
        "Never use headings in answers.",
        "Never use tables in answers.",
    ]
    with tenant_scope(tenant_a):
        facts = UserFact.objects.filter(user=member_a, kind="fact", superseded_at__isnull=True)
        assert facts.count() == 10


def test_the_policy_switch_and_unknown_kinds(tenant_a, member_a):
    with pytest.raises(FactRejected) as unknown:
        fact_save(tenant_a, member_a, "x", kind="mood")
    assert unknown.value.code == "invalid"
    make_policy(tenant_a, instructions_enabled=False)
    with pytest.raises(FactRejected) as off:
        fact_save_detailed(tenant_a, member_a, NUMBERS, kind="instruction")
    assert off.value.code == "disabled"
    conversation = make_conversation(tenant_a, member_a)
    assert instructions_capture(tenant_a, add_message(conversation, member_a, NUMBERS)) == []


def test_every_prompt_of_the_user_holds_them_in_the_cached_prefix(tenant_a, member_a):
    earlier = make_conversation(tenant_a, member_a)
    instructions_capture(tenant_a, add_message(earlier, member_a, SPANISH))
    fact_save(tenant_a, member_a, "Lives in Lyon")
    other = make_conversation(tenant_a, member_a)
    question = add_message(other, member_a, "What is a good lunch nearby?")
    prompt = assemble_turn(other, question).prompt
    assert "<user_instructions>" in prompt.system and SPANISH in prompt.system
    assert prompt.system.index("<user_instructions>") < prompt.system.index("<user_facts>")
    assert SPANISH not in prompt.tail
    section = prompt.section("instructions")
    assert section is not None and section.items == 1 and section.used > 0
    assert ("instruction", section.items) == (prompt.included[1].kind, 1)


def test_a_shared_conversation_holds_only_the_authors_shareable_ones(tenant_a, member_a):
    bob = make_member(tenant_a, username="bob")
    private = fact_save(tenant_a, member_a, SPANISH, kind="instruction")
    fact_save(tenant_a, member_a, NUMBERS, kind="instruction", shareable=True)
    group = make_conversation(tenant_a, member_a, participants=[bob])
    prompt = assemble_turn(group, add_message(group, member_a, "Which library?")).prompt
    text = prompt.system + "\n".join(m["content"] for m in prompt.messages)
    assert private.text not in text and NUMBERS in text


@pytest.mark.django_db(transaction=True)
def test_a_message_sent_through_the_api_is_noticed_after_its_commit(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    client = key_client(api_key_create(tenant=tenant_a, name="a", user=member_a)[1])
    response = client.post(
        f"{API}/conversations/{conversation.pk}/messages/", {"content": SPANISH}, format="json"
    )
    assert response.status_code == 201, response.content
    [kept] = standing(tenant_a, member_a)
    assert kept.text == SPANISH and kept.source_message_id == response.json()["message"]["id"]


@pytest.mark.django_db(transaction=True)
def test_an_edited_message_states_them_anew(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    question = add_message(conversation, member_a, SPANISH)
    make_message(conversation, "Claro.", role="assistant", answers=question)
    instructions_capture(tenant_a, question)
    user_message_edit(
        conversation=conversation, user=member_a, message_id=question.pk, content=NUMBERS
    )
    [kept] = standing(tenant_a, member_a)
    assert kept.text == NUMBERS and kept.source_message_id == question.pk
    [ended] = fact_history(tenant_a, member_a)
    assert (ended.text, ended.ended_reason) == (SPANISH, FactEnd.EDITED)
    user_message_edit(
        conversation=conversation, user=member_a, message_id=question.pk, content="Thanks!"
    )
    assert standing(tenant_a, member_a) == []
