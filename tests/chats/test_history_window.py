"""The cached window across turns, as the reply pipeline stores it: kept while the provider
caches it (with the summaries it started with), restarted when the cache has expired."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn
from chats.services import conversation_create, message_create
from chats.services.conversations import conversation_window_advance
from tests.factories import offline_profile, summary
from tests.summaries.helpers import make_policy

pytestmark = pytest.mark.django_db


def say(conversation, user, text):
    message, _ = message_create(
        conversation=conversation, role="user", content=text, author=user, validate=False
    )
    return message


def turn(conversation, message, now):
    with tenant_scope(conversation.tenant_id):
        fresh = Conversation.objects.get(pk=conversation.pk)
    prepared = assemble_turn(fresh, message, now=now)
    prompt = prepared.prompt
    conversation_window_advance(
        fresh,
        prompt.window_start_seq,
        prompt.recalled_ids,
        now,
        prepared.hypothetical_tokens,
        prompt.summary_ids,
        prompt.recalled_excerpt_ids,
    )
    return prompt


def test_a_kept_window_shows_its_summaries_until_it_restarts(tenant_a, member_a):
    offline = offline_profile()
    make_policy(tenant_a, model_profile=offline, raw_history_limit=40, history_trim_percent=60)
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Window")
    for i in range(30):
        say(conversation, member_a, f"Message {i} about the garden.")
    summary(conversation, 1, 10, "They planned a sailing trip to the Azores.")
    now = timezone.now()
    first = turn(conversation, say(conversation, member_a, "And then?"), now)
    assert "sailing trip" in first.system and not first.window_kept
    # a newer summary arrives; while the window is cached the prompt's prefix stays the same
    summary(conversation, 11, 20, "They argued about tomatoes.")
    second = turn(conversation, say(conversation, member_a, "More?"), now + timedelta(seconds=30))
    assert second.window_kept and second.system == first.system
    assert "tomatoes" not in second.system
    assert second.window_start_seq == first.window_start_seq
    # the cache has expired: the window restarts with the current summaries
    third = turn(conversation, say(conversation, member_a, "Later."), now + timedelta(hours=1))
    assert not third.window_kept and "tomatoes" in third.system


def test_a_reply_recalled_for_its_exchange_goes_as_its_head_while_the_window_lasts(
    tenant_a, member_a
):
    offline = offline_profile()
    make_policy(
        tenant_a,
        model_profile=offline,
        strategy="hybrid",
        max_context_tokens=3000,
        reserved_response_tokens=500,
        summaries_budget=0,
        retrieval_budget=1500,
        retrieval_max_items=20,
        retrieval_neighbors=0,
        min_recent_messages=2,
        recent_message_cap=4,
        history_trim_percent=100,
        reply_excerpt_tokens=30,
    )
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Excerpts")
    say(conversation, member_a, "Which zeppelin museum should I visit?")
    advice = " ".join(f"advice{i}" for i in range(400))
    message_create(conversation=conversation, role="assistant", content=advice, validate=False)
    for i in range(12):
        say(conversation, member_a, f"Unrelated note {i} about tomatoes.")
    now = timezone.now()
    first = turn(conversation, say(conversation, member_a, "Tell me about the zeppelin."), now)
    assert "Which zeppelin museum" in first.system
    assert "advice0" in first.system and "advice399" not in first.system
    assert len(first.recalled_excerpt_ids) == 1
    with tenant_scope(tenant_a):
        stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.window_excerpt_ids == list(first.recalled_excerpt_ids)
    # the next turn, while cached, sends the same excerpt: the prefix is unchanged
    second = turn(conversation, say(conversation, member_a, "And?"), now + timedelta(seconds=30))
    assert second.window_kept and second.system == first.system
