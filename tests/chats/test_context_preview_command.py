"""``manage.py context_preview --user``: the turn of a member who takes part in the
conversation, with their facts; by default the author of the last user message. Anyone else,
another tenant's user included, is refused like a name nobody has."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command

from chats.services import conversation_create
from memory.services import fact_save
from tests.factories import make_member, make_message

pytestmark = pytest.mark.django_db


def preview(conversation, *args: str) -> str:
    out = io.StringIO()
    call_command("context_preview", str(conversation.pk), *args, stdout=out)
    return out.getvalue()


def facts_items(output: str) -> int:
    row = re.search(r"^facts\s+[\d,]+\s+[\d,]+\s+(\d+)$", output, re.MULTILINE)
    assert row is not None, output
    return int(row[1])


@pytest.fixture
def talk(tenant_a, member_a):
    other = make_member(tenant_a, username="other-a")
    conversation = conversation_create(
        tenant=tenant_a, created_by=member_a, title="Plans", participants=[other]
    )
    make_message(conversation, "Where shall we meet?", author=member_a)
    fact_save(tenant_a, member_a, "Lives in Lisbon", key="home city", shareable=True)
    fact_save(tenant_a, member_a, "Prefers trains over planes", shareable=True)
    # A group chat's turn holds only the facts their owner shares with the group.
    fact_save(tenant_a, member_a, "Allergic to penicillin")
    return conversation, other


def test_the_default_turn_is_the_last_authors_with_their_facts(talk, member_a):
    conversation, _ = talk
    output = preview(conversation)
    assert f"turn of {member_a.username}, with their facts" in output
    assert facts_items(output) == 2


def test_user_picks_whose_turn_it_is(talk, member_a):
    conversation, other = talk
    assert facts_items(preview(conversation, "--user", member_a.username)) == 2
    output = preview(conversation, "--user", other.username)
    assert f"turn of {other.username}" in output and facts_items(output) == 0


def test_another_tenants_user_is_refused_like_a_missing_one(talk, member_b):
    conversation, _ = talk
    messages = []
    for username in (member_b.username, "nobody-by-that-name"):
        with pytest.raises(CommandError) as refused:
            preview(conversation, "--user", username)
        messages.append(str(refused.value).replace(username, "NAME"))
    assert messages[0] == messages[1]
    assert "does not take part in this conversation" in messages[0]


def test_a_conversation_nobody_wrote_in_previews_a_turn_without_facts(tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Empty")
    assert "turn without a user" in preview(conversation)
