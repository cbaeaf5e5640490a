"""A member's private facts never reach the other members of a group chat.

A fact is private unless its owner marks it shareable. Every participant reads a reply, so
the prompt of a turn in a conversation with more than one participant holds only the
author's shareable facts (and the fact tool lists only those); the author's one-to-one
conversations keep using all of them. Checked from the other member's side: what the
offline provider's reply shows them over the REST API, and what a real model would be sent.
"""

from __future__ import annotations

import pytest

from chatplatform.models.conversations import Participant
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.service import assemble_turn
from memory.services import fact_save
from memory.tools import execute_tool
from tests.api.conftest import API, key_client
from tests.api.helpers import add_message
from tests.factories import make_conversation, make_member

SECRET = "A-m2 SECRET FACT: allergic to penicillin"
SHARED = "Likes spicy food"
QUESTION = "What should we cook tonight?"


@pytest.fixture
def bob(tenant_a):
    return make_member(tenant_a, username="bob")


@pytest.fixture
def alices_facts(tenant_a, member_a):
    fact_save(tenant_a, member_a, SECRET)
    fact_save(tenant_a, member_a, SHARED, shareable=True)


def prompt_text(conversation, message) -> str:
    prompt = assemble_turn(conversation, message).prompt
    return prompt.system + "\n".join(m["content"] for m in prompt.messages)


def send(client, conversation, text: str) -> dict:
    response = client.post(
        f"{API}/conversations/{conversation.pk}/messages/", {"content": text}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def contents_seen_by(client, conversation) -> list[str]:
    response = client.get(f"{API}/conversations/{conversation.pk}/messages/")
    assert response.status_code == 200, response.content
    return [m["content"] for m in response.json()["results"]]


@pytest.mark.django_db(transaction=True)
def test_the_other_member_never_reads_a_private_fact(tenant_a, member_a, bob, alices_facts):
    group = make_conversation(tenant_a, member_a, title="Team", participants=[bob])
    alice = key_client(api_key_create(tenant=tenant_a, name="alice", user=member_a)[1])
    bobs = key_client(api_key_create(tenant=tenant_a, name="bob", user=bob)[1])

    reply = send(alice, group, QUESTION)["reply"]
    assert reply["status"] == "complete"
    seen = "\n".join(contents_seen_by(bobs, group))
    assert QUESTION in seen and "offline provider" in seen
    assert "SECRET" not in seen and "penicillin" not in seen
    assert SHARED in seen  # what Alice chose to share is used

    # Alice's own one-to-one chat still uses every fact of hers.
    private = make_conversation(tenant_a, member_a, title="Mine")
    assert SECRET in send(alice, private, QUESTION)["reply"]["content"]


@pytest.mark.django_db
def test_a_group_prompt_holds_only_shareable_facts(tenant_a, member_a, bob, alices_facts):
    group = make_conversation(tenant_a, member_a, title="Team", participants=[bob])
    in_group = prompt_text(group, add_message(group, member_a, QUESTION))
    assert SHARED in in_group
    assert "SECRET" not in in_group and "penicillin" not in in_group

    private = make_conversation(tenant_a, member_a, title="Mine")
    alone = prompt_text(private, add_message(private, member_a, QUESTION))
    assert SECRET in alone and SHARED in alone


@pytest.mark.django_db
def test_another_participant_makes_a_conversation_shared(tenant_a, member_a, bob, alices_facts):
    """Not flagged as a group, but someone else takes part: the same rule."""
    chat = make_conversation(tenant_a, member_a, title="Mine")
    with tenant_scope(tenant_a):
        Participant.objects.create(tenant=tenant_a, conversation=chat, user=bob)
    text = prompt_text(chat, add_message(chat, member_a, QUESTION))
    assert "SECRET" not in text and SHARED in text


@pytest.mark.django_db
def test_the_fact_tool_lists_only_shareable_facts_in_a_group(tenant_a, member_a, bob, alices_facts):
    group = make_conversation(tenant_a, member_a, title="Team", participants=[bob])
    in_group = add_message(group, member_a, QUESTION)
    listed = execute_tool(
        "get_user_facts", {}, tenant_id=tenant_a.pk, user_id=member_a.pk, message_id=in_group.pk
    )
    assert [f["text"] for f in listed["facts"]] == [SHARED]

    private = make_conversation(tenant_a, member_a, title="Mine")
    alone = add_message(private, member_a, QUESTION)
    listed = execute_tool(
        "get_user_facts", {}, tenant_id=tenant_a.pk, user_id=member_a.pk, message_id=alone.pk
    )
    assert sorted(f["text"] for f in listed["facts"]) == sorted([SECRET, SHARED])


@pytest.mark.django_db
def test_a_fact_is_private_until_marked_shareable_and_versions_keep_it(tenant_a, member_a):
    from memory.services import fact_set_shareable, fact_update

    fact = fact_save(tenant_a, member_a, "Lives in Porto", key="home_city")
    assert fact.shareable is False
    shared = fact_set_shareable(tenant_a, member_a, fact.pk, True)
    assert shared.pk == fact.pk and shared.shareable is True
    edited = fact_update(tenant_a, member_a, fact.pk, "Lives in Lisbon")
    assert edited.pk != fact.pk and edited.shareable is True
    replaced = fact_save(tenant_a, member_a, "Lives in Faro", key="home_city")
    assert replaced.shareable is True
    private = fact_save(tenant_a, member_a, "Lives in Faro", key="home_city", shareable=False)
    assert private.pk == replaced.pk and private.shareable is False
