"""A user's standing instructions ranked by meaning against a new message: the ones a small
prompt's instructions section has no room for still reach the answers they concern."""

from __future__ import annotations

import pytest

from chatplatform.core.context.types import FactItem
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.service import assemble_turn
from chats.retrieval import embeddings
from chats.retrieval.dense import embed_conversation
from chats.retrieval.standing import instructions_for_message
from chats.services import conversation_create
from memory.models import UserFact
from memory.services import instructions_capture
from tests.factories import make_policy

from .conftest import add
from .test_dense import use_policy

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not embeddings.available(), reason="the embeddings requirements are not installed"
    ),
]

#: The oldest first: the section keeps the newest, so the first one is left out of it.
TABLE = "Always include a summary table when I ask about performance metrics."
OTHERS = [
    "Always use metric units when I ask about hiking distances.",
    "Always cite the recipe source when I ask about baking bread.",
    "Never use emojis when I ask about cover letters.",
    "Always give the train times in 24-hour format when I ask about travel plans.",
    "Always name the plant's Latin name when I ask about my garden.",
    "Always answer in British spelling when I ask about essay drafts.",
]
QUESTION = "How did my model's performance metrics change after the latest run?"


def _stated(tenant, author, conversation, texts):
    for message in add(conversation, author, *texts):
        instructions_capture(tenant, message)


def _memories(tenant, user):
    with tenant_scope(tenant):
        rows = UserFact.objects.filter(user=user, superseded_at__isnull=True).order_by(
            "-created_at", "-pk"
        )
        return [FactItem(f.pk, f.text, kind=f.kind) for f in rows]


def test_the_instruction_a_message_concerns_ranks_first(tenant_a, member_a, tenant_b, member_b):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    _stated(tenant_a, member_a, conversation, [TABLE, *OTHERS])
    memories = _memories(tenant_a, member_a)
    assert instructions_for_message(tenant_a.pk, memories, QUESTION) == []  # no vectors yet
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    ranked = instructions_for_message(tenant_a.pk, memories, QUESTION)
    assert len(ranked) == 3 and [m.text for m in memories if m.id == ranked[0]] == [TABLE]
    # Another tenant's scope never reads them.
    assert instructions_for_message(tenant_b.pk, memories, QUESTION) == []


def test_a_small_section_leaves_the_oldest_out_and_the_turn_it_concerns_sends_it(
    tenant_a, member_a
):
    policy = make_policy(
        tenant_a,
        name="small instructions",
        strategy="hybrid",
        max_context_tokens=3000,
        reserved_response_tokens=500,
        system_budget=300,
        instructions_budget=150,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=300,
        min_recent_messages=2,
        recent_message_cap=4,
        retrieval_max_items=0,  # only the instructions, not their messages
        retrieval_dense=True,
    )
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    use_policy(conversation, policy)
    _stated(tenant_a, member_a, conversation, [TABLE, *OTHERS])
    embed_conversation(tenant_a.pk, conversation.pk, check_policy=False)
    unrelated = add(conversation, member_a, "Which trail should I hike this weekend?")[0]
    prompt = assemble_turn(conversation, unrelated).prompt
    bullet = f"- Instruction: {TABLE}"
    assert bullet not in prompt.system and bullet not in prompt.tail
    (question,) = add(conversation, member_a, QUESTION)
    prompt = assemble_turn(conversation, question).prompt
    assert bullet not in prompt.system  # the cached section is the same
    assert bullet in prompt.tail
    section = prompt.section("instructions")
    assert section is not None and section.used <= section.budget
