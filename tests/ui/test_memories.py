"""The memories page: the user's facts with add, edit (kept as history) and delete."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.selectors import current_facts, fact_history
from memory.services import fact_save

pytestmark = pytest.mark.django_db


def test_add_lists_the_fact(member_client, tenant_a, member_a):
    response = member_client.post(
        reverse("chats_ui:memory_add"), {"text": "I live in Lisbon", "key": "home city"}
    )
    assert response.status_code == 302
    page = member_client.get(reverse("chats_ui:memory_list")).content.decode()
    assert "I live in Lisbon" in page and "home_city" in page
    [fact] = current_facts(tenant_a, member_a)
    assert fact.key == "home_city" and fact.source == "user"


def test_invalid_fact_says_what_is_wrong(member_client, tenant_a, member_a):
    response = member_client.post(
        reverse("chats_ui:memory_add"), {"text": "x" * 600, "key": ""}, follow=True
    )
    assert "the limit is 500" in response.content.decode()
    bad_key = member_client.post(
        reverse("chats_ui:memory_add"), {"text": "ok", "key": "no way!"}, follow=True
    )
    assert "The key must be" in bad_key.content.decode()
    assert current_facts(tenant_a, member_a) == []


def test_edit_keeps_the_earlier_text_as_history(member_client, tenant_a, member_a):
    fact = fact_save(tenant_a, member_a, "Likes tea")
    url = reverse("chats_ui:memory_edit", args=[fact.pk])
    assert b"Likes tea" in member_client.get(url).content
    response = member_client.post(url, {"text": "Likes green tea"})
    assert response.status_code == 302
    [current] = current_facts(tenant_a, member_a)
    assert current.text == "Likes green tea"
    history = member_client.get(reverse("chats_ui:memory_history", args=[current.pk]))
    body = history.content.decode()
    assert "Likes tea" in body and "Likes green tea" in body
    listing = member_client.get(reverse("chats_ui:memory_list")).content.decode()
    assert "<s>Likes tea</s>" in listing  # the history section
    # The replaced version is history: it cannot be edited any more.
    assert member_client.get(url).status_code == 404


def test_delete_forgets_the_fact_and_its_versions(member_client, tenant_a, member_a):
    fact = fact_save(tenant_a, member_a, "Has a cat")
    response = member_client.post(reverse("chats_ui:memory_delete", args=[fact.pk]))
    assert response.status_code == 302
    assert current_facts(tenant_a, member_a) == []
    assert fact_history(tenant_a, member_a) == []
    assert member_client.get(reverse("chats_ui:memory_delete", args=[fact.pk])).status_code == 405


def test_facts_are_paginated(member_client, tenant_a, member_a):
    for i in range(25):
        fact_save(tenant_a, member_a, f"Fact number {i}")
    first = member_client.get(reverse("chats_ui:memory_list")).content.decode()
    assert "Fact number 24" in first and "Fact number 0<" not in first
    assert "Page 1 of 2" in first
    second = member_client.get(reverse("chats_ui:memory_list"), {"page": 2}).content.decode()
    assert "Fact number 0" in second


def test_a_fact_is_private_until_shared_on_the_page(member_client, tenant_a, member_a):
    member_client.post(reverse("chats_ui:memory_add"), {"text": "Allergic to penicillin"})
    member_client.post(reverse("chats_ui:memory_add"), {"text": "Likes tea", "shareable": "on"})
    facts = {f.text: f for f in current_facts(tenant_a, member_a)}
    assert not facts["Allergic to penicillin"].shareable and facts["Likes tea"].shareable
    page = member_client.get(reverse("chats_ui:memory_list")).content.decode()
    assert "Private" in page and "Shareable in group chats" in page

    secret = facts["Allergic to penicillin"]
    url = reverse("chats_ui:memory_share", args=[secret.pk])
    assert member_client.post(url, {"shareable": "on"}).status_code == 302
    [now] = [f for f in current_facts(tenant_a, member_a) if f.pk == secret.pk]
    assert now.shareable
    member_client.post(url, {})
    [now] = [f for f in current_facts(tenant_a, member_a) if f.pk == secret.pk]
    assert not now.shareable

    edit = reverse("chats_ui:memory_edit", args=[secret.pk])
    member_client.post(edit, {"text": "Allergic to aspirin", "shareable": "on"})
    [edited] = [f for f in current_facts(tenant_a, member_a) if f.text == "Allergic to aspirin"]
    assert edited.shareable


def test_another_users_fact_cannot_be_shared(member_client, tenant_a, admin_a):
    theirs = fact_save(tenant_a, admin_a, "Not yours")
    url = reverse("chats_ui:memory_share", args=[theirs.pk])
    assert member_client.post(url, {"shareable": "on"}).status_code == 404
    [fact] = current_facts(tenant_a, admin_a)
    assert not fact.shareable


def test_instructions_and_preferences_have_their_own_section_before_the_facts(
    member_client, tenant_a, member_a, admin_a
):
    fact_save(tenant_a, member_a, "Lives in Lisbon")
    rule = fact_save(tenant_a, member_a, "From now on, answer in Spanish", kind="instruction")
    liked = fact_save(tenant_a, member_a, "I prefer minimal dependencies", kind="preference")
    fact_save(tenant_a, admin_a, "Always answer in haiku", kind="instruction")
    body = member_client.get(reverse("chats_ui:memory_list")).content.decode()
    section = body.index("How you want to be answered")
    assert section < body.index("From now on, answer in Spanish") < body.index("Current facts")
    assert body.index("Current facts") < body.index("Lives in Lisbon")
    assert '<span class="badge memory-kind">Instruction</span> From now on' in body
    assert '<span class="badge memory-kind">Preference</span> I prefer minimal' in body
    for memory in (rule, liked):
        assert reverse("chats_ui:memory_edit", args=[memory.pk]) in body
        assert reverse("chats_ui:memory_delete", args=[memory.pk]) in body
        assert reverse("chats_ui:memory_history", args=[memory.pk]) in body
    assert "haiku" not in body  # another user's
    assert '<option value="instruction">Instruction</option>' in body  # add by kind


def test_an_instruction_from_a_message_says_so(member_client, tenant_a, member_a, conversation_a):
    from chats.services import message_create

    message, _ = message_create(
        conversation=conversation_a, role="user", content="Always be brief", author=member_a
    )
    fact_save(tenant_a, member_a, "Always be brief", source_message=message, kind="instruction")
    body = member_client.get(reverse("chats_ui:memory_list")).content.decode()
    assert "from your message of" in body


def test_add_an_instruction_by_hand_then_edit_and_delete_it(member_client, tenant_a, member_a):
    response = member_client.post(
        reverse("chats_ui:memory_add"),
        {"kind": "instruction", "text": "From now on, answer in Spanish", "key": "ignored"},
    )
    assert response.status_code == 302
    [rule] = current_facts(tenant_a, member_a)
    assert (rule.kind, rule.key, rule.source) == ("instruction", None, "user")

    edit = reverse("chats_ui:memory_edit", args=[rule.pk])
    assert "Edit this instruction" in member_client.get(edit).content.decode()
    member_client.post(edit, {"text": "From now on, answer in French"})
    [edited] = current_facts(tenant_a, member_a)
    assert edited.kind == "instruction" and edited.text == "From now on, answer in French"
    history = member_client.get(reverse("chats_ui:memory_history", args=[edited.pk]))
    text = history.content.decode()
    assert "History of this instruction" in text
    assert "<s>From now on, answer in Spanish</s>" in text
    listing = member_client.get(reverse("chats_ui:memory_list")).content.decode()
    assert "<s>From now on, answer in Spanish</s>" in listing  # the page's history section

    member_client.post(reverse("chats_ui:memory_delete", args=[edited.pk]))
    assert current_facts(tenant_a, member_a) == []


def test_an_unknown_kind_is_refused(member_client, tenant_a, member_a):
    response = member_client.post(
        reverse("chats_ui:memory_add"), {"kind": "rule", "text": "Be brief"}, follow=True
    )
    assert "Choose what it is: fact, instruction, preference." in response.content.decode()
    assert current_facts(tenant_a, member_a) == []


def test_another_users_instruction_is_404(member_client, tenant_a, admin_a, tenant_b, member_b):
    colleague = fact_save(tenant_a, admin_a, "Always answer in haiku", kind="instruction")
    foreign = fact_save(tenant_b, member_b, "I prefer terse answers", kind="preference")
    for memory in (colleague, foreign):
        for name in ("memory_edit", "memory_history"):
            assert (
                member_client.get(reverse(f"chats_ui:{name}", args=[memory.pk])).status_code == 404
            )
        for name in ("memory_delete", "memory_share"):
            assert (
                member_client.post(reverse(f"chats_ui:{name}", args=[memory.pk])).status_code == 404
            )
    assert [m.pk for m in current_facts(tenant_a, admin_a)] == [colleague.pk]
    assert [m.pk for m in current_facts(tenant_b, member_b)] == [foreign.pk]
