"""Content-Security-Policy: every page sends it, scripts come only from this origin, and no
page carries an inline script or event handler the policy would block (the browser tests check
the pages run under it with no violation)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from chatplatform.models import MembershipRole
from chatplatform.services import membership_add
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from memory.services import fact_save

pytestmark = pytest.mark.django_db

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)


def directives(response: Any) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    parts = [p.split() for p in header.split(";") if p.strip()]
    return {p[0]: p[1:] for p in parts}


@pytest.fixture
def superuser_client(tenant_a, tenant_b) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    membership_add(tenant=tenant_a, user=user, role=MembershipRole.ADMIN)
    membership_add(
        tenant=tenant_b, user=user, role=MembershipRole.MEMBER
    )  # shows the tenant switch
    client = Client()
    client.force_login(user)
    return client


def main_pages(tenant_a: Any, user: Any) -> list[str]:
    conversation = conversation_create(tenant=tenant_a, created_by=user, title="Plans")
    fact_save(tenant_a, user, "likes tea")  # the memories page shows its delete form
    with tenant_scope(tenant_a):
        policy = tenant_a.active_policy
    return [
        "/",
        reverse("chats_ui:conversation_list"),
        reverse("chats_ui:conversation_new"),
        reverse("chats_ui:conversation_detail", args=[conversation.pk]),
        reverse("chats_ui:conversation_summaries", args=[conversation.pk]),
        reverse("chats_ui:memory_list"),
        "/admin/",
        f"/admin/chatplatform/tenant/{tenant_a.pk}/change/",
        f"/admin/chatplatform/tenant/{tenant_a.pk}/usage/",
        f"/admin/chatplatform/contextpolicy/{policy.pk}/change/",
        "/admin/chatplatform/contextpolicy/add/",
        "/api/v1/docs/",
    ]


def test_every_page_sends_the_policy_and_has_no_inline_script(superuser_client, tenant_a):
    user = get_user_model().objects.get(username="root")
    pages = main_pages(tenant_a, user)
    anonymous = Client()
    for url, response in [
        ("/accounts/login/", anonymous.get("/accounts/login/")),
        ("/admin/login/", anonymous.get("/admin/login/")),
        *((url, superuser_client.get(url)) for url in pages),
    ]:
        assert response.status_code == 200, url
        policy = directives(response)
        assert policy["default-src"] == ["'self'"], url
        assert policy["script-src"] == ["'self'"], url
        assert policy["object-src"] == ["'none'"], url
        assert policy["frame-ancestors"] == ["'none'"], url
        html = response.content.decode()
        assert not INLINE_SCRIPT.search(html), (url, INLINE_SCRIPT.search(html))
        assert not EVENT_HANDLER.search(html), (url, EVENT_HANDLER.search(html))


def test_api_docs_script_is_served_from_this_origin(client):
    page = client.get("/api/v1/docs/").content.decode()
    scripts = re.findall(r'<script src="([^"]+)"', page)
    assert any("script" in src and src.startswith("/api/v1/docs/") for src in scripts), scripts
    init = client.get("/api/v1/docs/?script=")
    assert init.status_code == 200
    assert init["Content-Type"].startswith("application/javascript")
    assert b"SwaggerUIBundle" in init.content


def test_report_only_mode(settings, client):
    settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = settings.CONTENT_SECURITY_POLICY
    settings.CONTENT_SECURITY_POLICY = None
    response = client.get("/accounts/login/")
    assert "Content-Security-Policy" not in response
    assert "script-src 'self'" in response["Content-Security-Policy-Report-Only"]
