"""Admin additions for tenant admins: the policy editor's live bar and preview, the usage
page, and the job status page, each scoped to the tenants the admin administers."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create, api_key_revoke
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import conversation_create
from tests.factories import make_policy
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db


def tenant_policy(tenant, **overrides):
    """A policy with little room, so the reports have something to show."""
    values = {
        "name": f"{tenant.name} tight",
        "max_context_tokens": 8000,
        "reserved_response_tokens": 1000,
        "system_budget": 1000,
        "facts_budget": 500,
        "summaries_budget": 1000,
        "retrieval_budget": 1000,
        **overrides,
    }
    return make_policy(tenant, **values)


def json_script(body: str, element_id: str):
    found = re.search(rf'id="{element_id}" type="application/json">(.*?)</script>', body)
    assert found is not None, f"no #{element_id} in the page"
    return json.loads(found[1])


@pytest.fixture
def admin_client(client, admin_a):
    client.force_login(admin_a)
    return client


def test_policy_form_carries_the_live_bar_and_the_preview_link(admin_client, tenant_a):
    policy = tenant_policy(tenant_a)
    response = admin_client.get(
        reverse("admin:chatplatform_contextpolicy_change", args=[policy.pk])
    )
    body = response.content.decode()
    assert 'id="policy-bar"' in body and "admin-extras/policy-bar.js" in body
    windows = json_script(body, "policy-model-windows")
    assert windows[str(policy.model_profile_id)]["context_window"] == 200_000
    preview = reverse("admin:chatplatform_contextpolicy_preview", args=[policy.pk])
    assert preview in body


def test_preview_compares_the_policy_with_the_active_one(admin_client, tenant_a, admin_a, member_a):
    policy = tenant_policy(tenant_a)
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Long talk")
    for i in range(4):
        answered_turn(conversation, member_a, f"Message {i} " + "lorem ipsum " * 700)
    url = reverse("admin:chatplatform_contextpolicy_preview", args=[policy.pk])
    assert "Long talk" in admin_client.get(url).content.decode()
    response = admin_client.get(url, {"conversation": conversation.pk, "text": "next"})
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="preview-this"' in body and 'id="preview-active"' in body
    assert "Active policy: Hybrid" in body
    assert "did not fit the budget" in body  # the tight policy leaves history out
    this = response.context["comparison"]["this"]
    assert this["saved_tokens"] > 0 and this["window_tokens"] == 8000
    # the expected prompt cost per turn, replayed over the conversation's turns
    assert this["cost"]["turns"] == 4 and "Expected per turn" in body
    assert response.context["comparison"]["active"]["cost"]["turns"] == 4


def test_preview_offers_only_the_admins_conversations(
    admin_client, tenant_a, tenant_b, member_b, admin_b
):
    own = tenant_policy(tenant_a)
    foreign_conversation = conversation_create(tenant=tenant_b, created_by=member_b, title="B's")
    url = reverse("admin:chatplatform_contextpolicy_preview", args=[own.pk])
    assert "B&#x27;s" not in admin_client.get(url).content.decode()
    response = admin_client.get(url, {"conversation": foreign_conversation.pk})
    assert "Select a valid choice" in response.content.decode()
    assert 'id="preview-this"' not in response.content.decode()
    foreign_policy = tenant_policy(tenant_b)
    foreign_url = reverse("admin:chatplatform_contextpolicy_preview", args=[foreign_policy.pk])
    assert admin_client.get(foreign_url).status_code == 404


def test_presets_can_be_previewed_on_the_admins_conversations(admin_client, tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Mine")
    with all_tenants():
        preset = ContextPolicy.objects.get(tenant__isnull=True, name="Sliding window")
    url = reverse("admin:chatplatform_contextpolicy_preview", args=[preset.pk])
    response = admin_client.get(url, {"conversation": conversation.pk})
    assert response.status_code == 200 and 'id="preview-this"' in response.content.decode()


def test_usage_page_charts_the_tenants_turns(admin_client, tenant_a, tenant_b, member_a, member_b):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    answered_turn(conversation, member_a, "Hello " * 50)
    answered_turn(conversation, member_a, "Again " * 50)
    other = conversation_create(tenant=tenant_b, created_by=member_b)
    answered_turn(other, member_b, "B's turn")
    response = admin_client.get(reverse("admin:chatplatform_tenant_usage", args=[tenant_a.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    data = json_script(body, "usage-data")
    assert len(data["labels"]) == 30
    assert sum(data["prompt"]) > 0 and sum(data["hypothetical"]) >= sum(data["prompt"])
    assert response.context["report"].totals.turns == 2
    assert "vendor/chartjs/chart.umd.min.js" in body
    assert "Offline (built in)" in body  # calibration per model
    denied = admin_client.get(reverse("admin:chatplatform_tenant_usage", args=[tenant_b.pk]))
    assert denied.status_code == 404
    index = admin_client.get(reverse("admin:chatplatform_tenant_usage_index"))
    assert index["Location"] == reverse("admin:chatplatform_tenant_usage", args=[tenant_a.pk])


def test_jobs_page_shows_schedules_backlog_summaries_and_keys(
    admin_client, tenant_a, tenant_b, member_a, member_b
):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    with tenant_scope(tenant_a):
        Message.objects.create(
            tenant=tenant_a, conversation=conversation, seq=1, role="user", content="legacy"
        )
    api_key_create(tenant=tenant_a, name="integration-a")
    revoked, _ = api_key_create(tenant=tenant_a, name="old-a")
    api_key_revoke(key=revoked)
    api_key_create(tenant=tenant_b, name="integration-b")
    response = admin_client.get(reverse("admin:chatplatform_tenant_jobs"))
    body = response.content.decode()
    assert response.status_code == 200
    assert "summaries: backfill token counts" in body
    [row] = response.context["tenants"]
    assert row.tenant == tenant_a and row.uncounted_messages == 1
    assert "integration-a" in body and "old-a" in body and "integration-b" not in body
    assert [k.name for k in response.context["keys_revoked"]] == ["old-a"]


def test_members_do_not_reach_the_reports(client, member_a, tenant_a):
    client.force_login(member_a)
    for url in (
        reverse("admin:chatplatform_tenant_jobs"),
        reverse("admin:chatplatform_tenant_usage", args=[tenant_a.pk]),
    ):
        assert client.get(url)["Location"].startswith("/admin/login/")


def test_admin_index_links_to_the_reports(admin_client):
    body = admin_client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:chatplatform_tenant_jobs") in body
    assert reverse("admin:chatplatform_tenant_usage_index") in body
