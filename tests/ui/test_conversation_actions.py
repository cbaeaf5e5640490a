"""The sidebar of the chat pages: the user's conversations (archived ones apart, search), a
new chat, rename, archive and restore, delete (creator or tenant admin) or leave; the chat's
header names the model and the policy. Another tenant's conversation is 404 for each."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import Conversation, Participant
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import participant_add
from chats.services.conversations import conversation_archive
from tests.factories import make_conversation, make_member, make_message

pytestmark = pytest.mark.django_db

ACTIONS = ["rename", "archive", "unarchive", "delete", "leave"]


def url(action: str, conversation) -> str:
    return reverse(f"chats_ui:conversation_{action}", args=[conversation.pk])


def fresh(conversation) -> Conversation:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def exists(conversation) -> bool:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.filter(pk=conversation.pk).exists()


def test_sidebar_lists_active_conversations_newest_activity_first(
    member_client, tenant_a, member_a
):
    older = make_conversation(tenant_a, member_a, title="Older")
    newer = make_conversation(tenant_a, member_a, title="Newer")
    make_message(older, "bump", author=member_a)  # the latest activity
    hidden = make_conversation(tenant_a, member_a, title="Put away")
    conversation_archive(hidden)
    page = member_client.get(reverse("chats_ui:conversation_detail", args=[newer.pk]))
    rows = [row.conversation.pk for row in page.context["rows"]]
    assert rows == [older.pk, newer.pk]
    html = page.content.decode()
    assert 'aria-current="page"' in html and "Archived (1)" in html
    archived = member_client.get(reverse("chats_ui:conversation_list") + "?archived=1")
    assert [row.conversation.pk for row in archived.context["rows"]] == [hidden.pk]
    assert "Unarchive" in archived.content.decode()


def test_search_filters_the_users_own_conversations(member_client, tenant_a, member_a):
    make_conversation(tenant_a, member_a, title="Lisbon trip")
    make_conversation(tenant_a, member_a, title="Tax return")
    other = make_member(tenant_a, username="other")
    make_conversation(tenant_a, other, title="Lisbon office")
    page = member_client.get(reverse("chats_ui:conversation_list") + "?q=lisbon")
    assert [row.conversation.title for row in page.context["rows"]] == ["Lisbon trip"]


def test_new_chat_opens_an_empty_conversation_and_reuses_it(member_client, tenant_a):
    first = member_client.post(reverse("chats_ui:conversation_start"))
    second = member_client.post(reverse("chats_ui:conversation_start"))
    assert first.status_code == 302 and first["Location"] == second["Location"]
    with tenant_scope(tenant_a):
        assert Conversation.objects.count() == 1
    assert member_client.get(reverse("chats_ui:conversation_start")).status_code == 405


def test_header_names_the_model_and_the_policy(member_client, conversation_a):
    policy = policy_for(conversation_a)
    page = member_client.get(reverse("chats_ui:conversation_detail", args=[conversation_a.pk]))
    html = page.content.decode()
    assert f'<strong id="chat-model">{policy.model_profile.name}</strong>' in html
    assert f'<strong id="chat-policy">{policy.name}</strong>' in html


def test_rename_archive_and_restore(member_client, conversation_a):
    here = reverse("chats_ui:conversation_list")
    response = member_client.post(
        url("rename", conversation_a), {"title": "  Lisbon in May ", "next": here}
    )
    assert response["Location"] == here
    assert fresh(conversation_a).title == "Lisbon in May"
    refused = member_client.post(url("rename", conversation_a), {"title": "x" * 201}, follow=True)
    assert "at most 200 characters" in refused.content.decode()
    assert fresh(conversation_a).title == "Lisbon in May"
    member_client.post(url("archive", conversation_a))
    assert fresh(conversation_a).archived_at is not None
    member_client.post(url("unarchive", conversation_a))
    assert fresh(conversation_a).archived_at is None


def test_next_must_be_a_path_of_this_site(member_client, conversation_a):
    response = member_client.post(
        url("archive", conversation_a), {"next": "https://evil.example/phish"}
    )
    assert response["Location"] == reverse("chats_ui:conversation_detail", args=[conversation_a.pk])


def test_a_member_leaves_a_shared_conversation_and_cannot_delete_it(client, tenant_a, member_a):
    colleague = make_member(tenant_a, username="colleague")
    conversation = make_conversation(tenant_a, member_a, title="Shared")
    participant_add(conversation=conversation, user=colleague)
    client.force_login(colleague)
    page = client.get(reverse("chats_ui:conversation_detail", args=[conversation.pk]))
    assert ">Leave</button>" in page.content.decode()
    assert ">Delete</button>" not in page.content.decode()
    refused = client.post(url("delete", conversation), follow=True)
    assert "or a tenant admin may delete it. You can leave it instead." in refused.content.decode()
    assert exists(conversation)
    left = client.post(url("leave", conversation))
    assert left["Location"] == reverse("chats_ui:conversation_list")
    with tenant_scope(tenant_a):
        assert not Participant.objects.filter(
            conversation_id=conversation.pk, user=colleague
        ).exists()
    assert exists(conversation)  # the creator keeps it
    again = client.get(reverse("chats_ui:conversation_detail", args=[conversation.pk]))
    assert again.status_code == 404


def test_the_creator_and_a_tenant_admin_delete(client, member_client, tenant_a, member_a, admin_a):
    mine = make_conversation(tenant_a, member_a, title="Mine")
    assert member_client.post(url("delete", mine))["Location"] == reverse(
        "chats_ui:conversation_list"
    )
    assert not exists(mine)
    theirs = make_conversation(tenant_a, member_a, title="Theirs")
    participant_add(conversation=theirs, user=admin_a)
    client.force_login(admin_a)
    client.post(url("delete", theirs))
    assert not exists(theirs)


@pytest.mark.parametrize("action", ACTIONS)
def test_another_tenants_conversation_is_404_like_a_missing_one(
    member_client, conversation_b, action
):
    missing = Conversation(pk=10**9)
    for target in (conversation_b, missing):
        response = member_client.post(url(action, target), {"title": "taken"})
        assert response.status_code == 404
    stored = fresh(conversation_b)
    assert stored.title == "Beta plans" and stored.archived_at is None
    with tenant_scope(conversation_b.tenant_id):
        assert Participant.objects.filter(conversation_id=conversation_b.pk).count() == 1


@pytest.mark.parametrize("action", ACTIONS)
def test_a_member_of_the_tenant_who_is_not_in_it_gets_404(client, tenant_a, conversation_a, action):
    outsider = make_member(tenant_a, username="outsider")
    client.force_login(outsider)
    assert client.post(url(action, conversation_a), {"title": "taken"}).status_code == 404
    assert fresh(conversation_a).title == "Trip planning"
