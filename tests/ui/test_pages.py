"""The web UI's pages render for a member, and require a log-in."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db


def test_anonymous_visitors_are_sent_to_the_login_page(client, conversation_a):
    urls = [
        reverse("chats_ui:conversation_list"),
        reverse("chats_ui:conversation_new"),
        reverse("chats_ui:conversation_detail", args=[conversation_a.pk]),
        reverse("chats_ui:turn_meter", args=[conversation_a.pk]),
        reverse("chats_ui:conversation_summaries", args=[conversation_a.pk]),
        reverse("chats_ui:memory_list"),
        reverse("chats_ui:memory_history", args=[1]),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url


def test_home_lists_recent_conversations(member_client, conversation_a):
    response = member_client.get("/")
    assert response.status_code == 200
    assert b"Tenant A" in response.content
    assert b"Trip planning" in response.content


def test_conversation_list_and_search(member_client, conversation_a, tenant_a, member_a):
    from chats.services import conversation_create

    other = conversation_create(tenant=tenant_a, created_by=member_a, title="Recipes")
    answered_turn(other, member_a, "How long do I boil an egg?")
    response = member_client.get(reverse("chats_ui:conversation_list"))
    assert b"Trip planning" in response.content and b"Recipes" in response.content
    by_title = member_client.get(reverse("chats_ui:conversation_list"), {"q": "trip"})
    assert b"Trip planning" in by_title.content and b"Recipes" not in by_title.content
    by_message = member_client.get(reverse("chats_ui:conversation_list"), {"q": "boil an egg"})
    assert b"Recipes" in by_message.content and b"Trip planning" not in by_message.content


def test_chat_view_shows_messages_with_authors_and_escapes_html(
    member_client, conversation_a, member_a
):
    answered_turn(conversation_a, member_a, "<script>alert(1)</script> **hi**")
    response = member_client.get(reverse("chats_ui:conversation_detail", args=[conversation_a.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert f"@{member_a.username}" in body  # author label of the user's message
    assert 'id="m-1"' in body and 'id="m-2"' in body  # anchors for summary links
    assert "Assistant" in body  # the bot's name on the reply
    assert '"wsPath": "/ws/conversations/' in body


def test_chat_view_pages_through_long_histories(member_client, conversation_a, member_a):
    from chats.services import message_create

    for i in range(120):
        message_create(conversation=conversation_a, role="user", content=f"m{i}", author=member_a)
    url = reverse("chats_ui:conversation_detail", args=[conversation_a.pk])
    newest = member_client.get(url).content.decode()
    assert 'id="m-120"' in newest and 'id="m-1"' not in newest
    assert "?before=21" in newest
    earlier = member_client.get(url, {"before": 21}).content.decode()
    assert 'id="m-1"' in earlier and 'id="m-21"' not in earlier
    around = member_client.get(url, {"around": 5}).content.decode()
    assert 'id="m-5"' in around and "Newest messages" in around


def test_new_conversation_form_renders(member_client):
    response = member_client.get(reverse("chats_ui:conversation_new"))
    assert response.status_code == 200
    assert b"New conversation" in response.content


def test_summaries_page_links_to_the_messages_covered(member_client, conversation_a, member_a):
    from summaries.models import Summary

    answered_turn(conversation_a, member_a, "First")
    with tenant_scope(conversation_a.tenant_id):
        first, last = Message.objects.filter(conversation=conversation_a).order_by("seq")
        Summary.objects.create(
            tenant_id=conversation_a.tenant_id,
            conversation=conversation_a,
            kind="rolling",
            first_seq=1,
            last_seq=2,
            first_message=first,
            last_message=last,
            text="The user said **first**.",
            token_count=5,
            token_counter="o200k_base",
            source_tokens=40,
            model="offline",
            prompt_version="1",
        )
    response = member_client.get(
        reverse("chats_ui:conversation_summaries", args=[conversation_a.pk])
    )
    body = response.content.decode()
    assert response.status_code == 200
    detail = reverse("chats_ui:conversation_detail", args=[conversation_a.pk])
    assert f'{detail}?around=1#m-1"' in body and f'{detail}?around=2#m-2"' in body
    assert "The user said **first**." in body


def test_user_without_a_tenant_is_told_so(client):
    from tests.factories import UserFactory

    client.force_login(UserFactory())
    response = client.get(reverse("chats_ui:conversation_list"))
    assert response.status_code == 403
    assert b"not a member of any active tenant" in response.content


def test_logout_is_a_post_and_ends_the_session(member_client):
    response = member_client.post(reverse("logout"))
    assert response.status_code == 302
    assert member_client.get(reverse("chats_ui:conversation_list")).status_code == 302


def test_the_summaries_page_links_a_merged_summary_to_its_sources(
    member_client, conversation_a, member_a
):
    from summaries.selectors import summaries_for
    from tests.api.test_summaries import merged_summaries

    merged_summaries(conversation_a, member_a)
    (top,) = [s for s in summaries_for(conversation_a) if s.level]
    url = reverse("chats_ui:conversation_summaries", args=[conversation_a.pk])
    body = member_client.get(url).content.decode()
    assert "(merged, level 1)" in body and "Merges 2 summaries:" in body
    for source in top.sources:
        assert f'href="?history=1#summary-{source.id}"' in body
        assert f"messages #{source.first_seq}–#{source.last_seq}" in body
    history = member_client.get(f"{url}?history=1").content.decode()
    for source in top.sources:
        assert f'id="summary-{source.id}"' in history
    assert history.count(f'href="?history=1#summary-{top.id}"') == 2  # each source links up
