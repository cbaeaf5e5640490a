"""Standing instructions a summary quotes become the users' own memories: only a quote that
stands in a user's message of the span, as that message's author's memory, once per message
(a second run, or one after the owner deleted it, keeps nothing), after the summary commits."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from chatplatform.core.tokens import get_counter
from chatplatform.tenancy.scoping import tenant_scope
from chats.summary_instructions import summary_instructions_keep
from memory.selectors import current_facts
from memory.services import fact_delete, fact_save
from summaries.models import Summary
from summaries.summarizer import ModelSummarizer, SourceMessage
from summaries.summarizer.render import render_summary
from summaries.summarizer.types import StructuredSummary
from tests.factories import make_conversation, make_member, make_message
from tests.summaries.helpers import ScriptedProvider

pytestmark = pytest.mark.django_db

HIDDEN = "Please keep every answer under a hundred words for the rest of our work together."


def summary_of(conversation, messages, instructions, kind="rolling") -> Summary:
    content = StructuredSummary(summary="They planned.", instructions=tuple(instructions))
    with tenant_scope(conversation.tenant_id):
        return Summary.objects.create(
            tenant_id=conversation.tenant_id,
            conversation_id=conversation.pk,
            kind=kind,
            first_seq=messages[0].seq,
            last_seq=messages[-1].seq,
            content=content.as_content(),
            text=render_summary(content),
            token_count=5,
            token_counter="o200k_base",
            model="fake-model",
            prompt_version="rolling-json-2",
        )


def test_a_quote_of_a_users_message_is_kept_as_their_memory_once(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a)
    said = make_message(conversation, "Hi. " + HIDDEN, author=member_a)
    reply = make_message(conversation, "From now on I will answer in French.", role="assistant")
    summary = summary_of(
        conversation,
        [said, reply],
        [
            " please keep every answer under a hundred words  for the rest of our work together.",
            "From now on I will answer in French.",  # the assistant's words, not the user's
            "Always answer in haiku.",  # stands in no message
        ],
    )
    assert summary_instructions_keep(tenant_a.pk, summary.pk) == 1
    [memory] = current_facts(tenant_a, member_a)
    assert memory.kind == "instruction" and memory.source_message_id == said.pk
    assert "hundred words" in memory.text and memory.source == "user"

    assert summary_instructions_keep(tenant_a.pk, summary.pk) == 0  # a second run: nothing
    # A periodic summary covers the messages again: it is not read.
    fact_delete(tenant_a, member_a, memory.pk)
    again = summary_of(conversation, [said, reply], [HIDDEN], kind="recent")
    assert summary_instructions_keep(tenant_a.pk, again.pk) == 0
    assert current_facts(tenant_a, member_a) == []


def test_whose_memory_is_the_author_of_the_message(tenant_a, member_a):
    other = make_member(tenant_a, username="other-a")
    conversation = make_conversation(tenant_a, member_a, participants=[other])
    first = make_message(conversation, "Let us plan the launch.", author=member_a)
    words = "Bullet lists work best for me in everything you write."
    theirs = make_message(conversation, words, author=other)
    summary = summary_of(conversation, [first, theirs], [words])
    assert summary_instructions_keep(tenant_a.pk, summary.pk) == 1
    assert current_facts(tenant_a, member_a) == []
    [memory] = current_facts(tenant_a, other)
    assert memory.kind == "instruction" and memory.source_message_id == theirs.pk


def test_a_message_intake_noticed_is_left_to_intake(tenant_a, member_a):
    """Intake kept it, or its owner deleted it since: either way the summary adds nothing."""
    conversation = make_conversation(tenant_a, member_a)
    kept = make_message(conversation, "From now on, answer in Spanish.", author=member_a)
    fact_save(
        tenant_a,
        member_a,
        "From now on, answer in Spanish.",
        source_message=kept,
        kind="instruction",
    )
    deleted = make_message(conversation, "Always include version numbers.", author=member_a)
    summary = summary_of(
        conversation, [kept, deleted], ["answer in Spanish", "Always include version numbers."]
    )
    assert summary_instructions_keep(tenant_a.pk, summary.pk) == 0
    assert [m.source_message_id for m in current_facts(tenant_a, member_a)] == [kept.pk]


def test_a_stored_summary_that_quotes_instructions_keeps_them_after_commit(
    tenant_a, member_a, django_capture_on_commit_callbacks, settings
):
    from config.celery import app as celery_app

    conversation = make_conversation(tenant_a, member_a)
    said = make_message(conversation, HIDDEN, author=member_a)
    later = make_message(conversation, "Thanks.", author=member_a)
    old = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            summary_of(conversation, [said], [HIDDEN])
            summary_of(conversation, [later], [])  # quotes nothing: no job
            summary_of(conversation, [said, later], [HIDDEN], kind="recent")  # not read
    finally:
        celery_app.conf.task_always_eager = old
    assert len(callbacks) == 1
    [memory] = current_facts(tenant_a, member_a)
    assert memory.text == HIDDEN and memory.source_message_id == said.pk


def test_the_model_is_asked_for_the_instructions_and_they_are_not_rendered():
    answer = json.dumps(
        {
            "summary": "Ada planned the launch.",
            "facts": ["Launch on March 14"],
            "open_questions": [],
            "instructions": ["Always include version numbers."],
        }
    )
    provider = ScriptedProvider([answer])
    engine = ModelSummarizer(
        provider_factory=lambda: provider,
        model="fake-model",
        counter=get_counter("o200k_base"),
        context_window=100_000,
        max_output_tokens=4096,
        pricing=lambda usage: Decimal(0),
    )
    draft = engine.summarize_messages(
        [SourceMessage(1, "user", "Always include version numbers.")], max_tokens=200
    )
    assert draft.content.instructions == ("Always include version numbers.",)
    assert draft.content.as_content()["instructions"] == ["Always include version numbers."]
    assert "version numbers" not in draft.text
    assert '"instructions"' in provider.requests[0].system
    without = StructuredSummary(summary="x")
    assert "instructions" not in without.as_content()
    assert StructuredSummary.from_content(draft.content.as_content()) == draft.content
