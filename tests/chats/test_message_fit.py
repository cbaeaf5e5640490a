"""Whether a draft fits the next turn whole: the composer's numbers are the assembly's (the
same counter, budget and cut as the turn that sends the message)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chats.assembly import assemble_turn
from chats.assembly.fit import message_fit
from chats.services import message_create
from tests import factories

pytestmark = pytest.mark.django_db

#: A 4,000-token policy, as a tenant admin might set for a cheap chat.
SMALL_POLICY = dict(
    strategy="sliding_window",
    max_context_tokens=4000,
    reserved_response_tokens=1000,
    system_budget=300,
    facts_budget=0,
    summaries_budget=0,
    retrieval_budget=0,
)

WORDS = ("the", "committee", "reviewed", "every", "clause", "of", "an", "agreement", "before")


def long_paste(words: int = 3000) -> str:
    return " ".join(f"{WORDS[i % len(WORDS)]}{i % 7 or ''}" for i in range(words))


def test_a_paste_larger_than_the_room_is_reported_cut_to_what_the_turn_sends(
    conversation, tenant_a, member_a
):
    factories.make_policy(tenant_a, activate=True, **SMALL_POLICY)
    text = long_paste()

    fit = message_fit(conversation, text=text, author=member_a)

    # What the turn then does with the same text, stored and assembled for real.
    message, _ = message_create(
        conversation=conversation, role="user", content=text, author=member_a
    )
    turn = assemble_turn(conversation, message)
    cut = next(t for t in turn.prompt.truncated if t.kind == "new_message")
    assert fit.fits is False
    assert fit.tokens == cut.original_tokens == turn.counter.count(text)
    assert fit.kept == cut.kept_tokens
    assert fit.kept < fit.room < fit.tokens
    assert fit.tokens > 4000  # the whole paste is over the policy's whole limit
    assert fit.policy_limit == 4000 and fit.counter == turn.counter.name


def test_a_message_within_the_room_is_sent_whole(conversation, tenant_a, member_a):
    factories.make_policy(tenant_a, activate=True, **SMALL_POLICY)
    text = long_paste(200)

    fit = message_fit(conversation, text=text, author=member_a)

    message, _ = message_create(
        conversation=conversation, role="user", content=text, author=member_a
    )
    turn = assemble_turn(conversation, message)
    assert not [t for t in turn.prompt.truncated if t.kind == "new_message"]
    assert fit.fits is True
    assert fit.kept == fit.tokens == turn.counter.count(text)
    # The room is what the turn leaves the new message: the section's budget.
    section = turn.prompt.section("new_message")
    assert section is not None
    assert fit.room == section.budget - (section.used - fit.tokens)
    assert fit.tokens < fit.room


def test_the_room_is_the_policys_not_the_drafts(conversation, tenant_a, member_a):
    """The page may skip asking while a draft is surely under the room: the room a short
    draft reports is the one a long draft is measured against."""
    factories.make_policy(tenant_a, activate=True, **SMALL_POLICY)
    room = message_fit(conversation, text="hello", author=member_a).room
    fit = message_fit(conversation, text=long_paste(room * 2), author=member_a)
    assert not fit.fits and fit.room == room
    assert 0 < room < 4000 - 1000


def test_the_endpoint_answers_participants_only(
    client, conversation, conversation_b, member_a, member_b, tenant_a
):
    factories.make_policy(tenant_a, activate=True, **SMALL_POLICY)
    client.force_login(member_a)
    url = reverse("chats_ui:message_fit", args=[conversation.pk])
    data = client.post(url, {"text": long_paste()}).json()["fit"]
    assert data["fits"] is False and data["kept"] < data["room"] < data["tokens"]
    assert client.post(url, {"text": "x" * 10**6}).status_code == 400

    # Another tenant's conversation, and a missing one: the same 404.
    other = reverse("chats_ui:message_fit", args=[conversation_b.pk])
    missing = reverse("chats_ui:message_fit", args=[conversation_b.pk + 1000])
    assert client.post(other, {"text": "hi"}).status_code == 404
    assert client.post(missing, {"text": "hi"}).status_code == 404
    client.force_login(member_b)
    assert client.post(url, {"text": "hi"}).status_code == 404


def test_a_policy_that_sends_long_messages_whole_says_so_and_the_turn_sends_it_whole(
    conversation, tenant_a, member_a
):
    factories.make_policy(tenant_a, activate=True, oversized_message="whole", **SMALL_POLICY)
    text = long_paste()

    fit = message_fit(conversation, text=text, author=member_a)

    message, _ = message_create(
        conversation=conversation, role="user", content=text, author=member_a
    )
    turn = assemble_turn(conversation, message)
    assert not turn.prompt.new_message_truncated
    assert turn.prompt.widened_by > 0
    assert fit.fits is True and fit.beyond_policy is True
    assert fit.kept == fit.tokens == turn.counter.count(text)
    assert fit.room < fit.tokens  # the policy's own room did not hold it
    # within the model's window, never past it
    window = turn.profile.context_window - turn.policy.reserved_response_tokens
    assert turn.prompt.prompt_tokens * turn.prompt.margin_ratio <= window
