"""Exports through the REST API: started as a job, followed, downloaded with the same key by
its owner only; another user's or tenant's export is 404; an admin of the tenant exports
the whole tenant from its admin page, and only the tenant's admins download it."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from chatplatform.models import AuditAction, AuditEvent, Transfer
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from tests.factories import make_conversation, make_member, make_message

pytestmark = pytest.mark.django_db(transaction=True)


def key_client(tenant, user) -> APIClient:
    _, raw = api_key_create(tenant=tenant, name="k", user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_export_through_the_api(tenant_a, member_a, tenant_b, member_b, jobs_run):
    make_message(make_conversation(tenant_a, member_a, title="Via API"), "hi", author=member_a)
    make_message(make_conversation(tenant_b, member_b, title="B's"), "secret", author=member_b)
    api = key_client(tenant_a, member_a)
    started = api.post("/api/v1/exports/", {"format": "claude"}, format="json")
    assert started.status_code == 202
    export_id = started.json()["id"]
    detail = api.get(f"/api/v1/exports/{export_id}/").json()
    assert detail["status"] == "done" and detail["result"]["conversations"] == 1
    assert detail["download"] == f"/api/v1/exports/{export_id}/download/"
    file = api.get(detail["download"])
    assert file.status_code == 200
    items = json.loads(b"".join(file.streaming_content))  # type: ignore[attr-defined]
    assert [i["name"] for i in items] == ["Via API"]
    assert api.get("/api/v1/exports/").json()["results"][0]["id"] == export_id
    assert api.post("/api/v1/exports/", {"format": "pdf"}, format="json").status_code == 400

    other = key_client(tenant_a, make_member(tenant_a, username="other-a"))
    assert other.get(f"/api/v1/exports/{export_id}/").status_code == 404
    assert other.get(f"/api/v1/exports/{export_id}/download/").status_code == 404
    foreign = key_client(tenant_b, member_b)
    assert foreign.get(f"/api/v1/exports/{export_id}/download/").status_code == 404
    assert foreign.get("/api/v1/exports/").json()["results"] == []


def test_the_tenant_admin_exports_the_whole_tenant(
    client, tenant_a, admin_a, member_a, tenant_b, admin_b, member_b, jobs_run
):
    make_message(make_conversation(tenant_a, member_a, title="Member's"), "m", author=member_a)
    make_message(make_conversation(tenant_a, admin_a, title="Admin's"), "a", author=admin_a)
    make_message(make_conversation(tenant_b, member_b, title="Not A's"), "b", author=member_b)
    client.force_login(admin_a)
    page = f"/admin/chatplatform/tenant/{tenant_a.pk}/exports/"
    assert client.post(page, {"format": "claude"}).status_code == 302
    html = client.get(page).content.decode()
    start = html.index('href="/account/downloads/') + len('href="')
    link = html[start : html.index('"', start)]
    items = json.loads(b"".join(client.get(link).streaming_content))
    assert sorted(i["name"] for i in items) == ["Admin's", "Member's"]
    with tenant_scope(tenant_a):
        assert AuditEvent.objects.filter(action=AuditAction.TENANT_EXPORTED).count() == 1
        assert Transfer.objects.get().user_id == admin_a.pk
    # Not the members, not another tenant's admin (neither the page nor the file).
    client.force_login(member_a)
    assert client.get(link).status_code == 404
    client.force_login(admin_b)
    assert client.get(link).status_code == 404
    assert client.get(page).status_code == 404
    assert client.post(page, {"format": "claude"}).status_code == 404
    with tenant_scope(tenant_b):
        assert not Transfer.objects.exists()
