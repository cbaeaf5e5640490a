"""The tenant switcher stores the chosen tenant after checking the membership."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.services import membership_add
from chats.services import conversation_create
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_tenant_user(tenant_a, tenant_b, member_a):
    membership_add(tenant=tenant_b, user=member_a)
    conversation_create(tenant=tenant_a, created_by=member_a, title="Chat in A")
    conversation_create(tenant=tenant_b, created_by=member_a, title="Chat in B")
    return member_a


def test_switcher_is_shown_to_users_of_several_tenants(client, two_tenant_user):
    client.force_login(two_tenant_user)
    body = client.get(reverse("chats_ui:conversation_list")).content.decode()
    assert 'name="tenant_id"' in body
    assert "Tenant A" in body and "Tenant B" in body


def test_switcher_is_hidden_for_a_single_tenant(member_client):
    body = member_client.get(reverse("chats_ui:conversation_list")).content.decode()
    assert 'name="tenant_id"' not in body


def test_switching_changes_the_tenant_of_every_page(client, two_tenant_user, tenant_a, tenant_b):
    client.force_login(two_tenant_user)
    first = client.get(reverse("chats_ui:conversation_list")).content
    assert b"Chat in A" in first and b"Chat in B" not in first
    response = client.post(reverse("chats_ui:tenant_switch"), {"tenant_id": tenant_b.pk})
    assert response.status_code == 302
    assert response["Location"] == reverse("chats_ui:conversation_list")
    assert client.session["tenant_id"] == tenant_b.pk
    second = client.get(reverse("chats_ui:conversation_list")).content
    assert b"Chat in B" in second and b"Chat in A" not in second


def test_a_tenant_the_user_does_not_belong_to_is_not_found(client, member_a, tenant_b):
    client.force_login(member_a)
    stranger = make_tenant("Stranger")
    for tenant_id in (tenant_b.pk, stranger.pk, 999999, "x"):
        response = client.post(reverse("chats_ui:tenant_switch"), {"tenant_id": tenant_id})
        assert response.status_code == 404
    assert "tenant_id" not in client.session


def test_switching_needs_a_post_and_a_log_in(client, member_a, tenant_a):
    assert client.post(reverse("chats_ui:tenant_switch"), {"tenant_id": tenant_a.pk})[
        "Location"
    ].startswith("/accounts/login/")
    client.force_login(member_a)
    assert client.get(reverse("chats_ui:tenant_switch")).status_code == 405
