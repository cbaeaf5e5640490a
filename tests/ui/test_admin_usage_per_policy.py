"""Usage and cost per policy: the tenant usage page breaks the turns down by the policy that
served them (a table and a chart); each policy's change page shows that policy's own turns
and cost over the last 30 days. A tenant admin only ever counts their tenant's turns, a
shared preset included."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from chatplatform.models import ContextPolicy
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from console.reports import policy_usage_report, usage_report
from tests.api.helpers import add_turn
from tests.factories import make_policy
from tests.ui.test_admin_reports import json_script

pytestmark = pytest.mark.django_db


@pytest.fixture
def preset(presets):
    with tenant_scope([]):
        return ContextPolicy.objects.filter(tenant__isnull=True).order_by("name").first()


@pytest.fixture
def admin_client(client, admin_a):
    client.force_login(admin_a)
    return client


def turns(tenant, user, policy, count, *, cost="0.010", full="0.050", when=None):
    conversation = conversation_create(tenant=tenant, created_by=user, title="Usage")
    for _ in range(count):
        add_turn(conversation, user, policy=policy, cost=cost, full_cost=full, when=when)


def test_the_tenant_report_breaks_the_turns_down_by_policy(
    tenant_a, tenant_b, admin_a, admin_b, preset
):
    own = make_policy(tenant_a, name="Compact")
    turns(tenant_a, admin_a, own, 3)
    turns(tenant_a, admin_a, preset, 1, cost="0.040", full="0.040")
    turns(tenant_b, admin_b, preset, 5, cost="1.000")  # another tenant's turns

    report = usage_report(tenant_a)
    rows = {p.name: p for p in report.policies}
    assert set(rows) == {"Compact", preset.name}
    assert rows["Compact"].usage.turns == 3
    assert rows["Compact"].usage.cost_usd == Decimal("0.030")
    assert rows["Compact"].usage.saved_usd == Decimal("0.120")
    assert rows[preset.name].usage.turns == 1 and rows[preset.name].is_preset
    assert rows[preset.name].usage.cost_usd == Decimal("0.040")
    # The costliest first; shares of the bill add up.
    assert [p.name for p in report.policies] == [preset.name, "Compact"]
    assert rows[preset.name].cost_share_percent == 57.1
    assert rows["Compact"].cost_share_percent == 42.9
    assert sum(d.turns for d in report.days) == report.totals.turns == 4


def test_turns_whose_policy_was_deleted_are_counted_apart(tenant_a, admin_a):
    gone = make_policy(tenant_a, name="Old")
    turns(tenant_a, admin_a, gone, 2)
    with tenant_scope(tenant_a):
        ContextPolicy.objects.filter(pk=gone.pk).delete()
    (row,) = usage_report(tenant_a).policies
    assert row.policy_id is None and row.name == "Deleted policy" and row.usage.turns == 2


def test_the_usage_page_shows_the_table_and_the_chart(admin_client, tenant_a, admin_a, preset):
    own = make_policy(tenant_a, name="Compact")
    turns(tenant_a, admin_a, own, 2)
    response = admin_client.get(reverse("admin:chatplatform_tenant_usage", args=[tenant_a.pk]))
    body = response.content.decode()
    assert 'id="usage-policy-table"' in body and 'id="policies-chart"' in body
    assert reverse("admin:chatplatform_contextpolicy_change", args=[own.pk]) in body
    data = json_script(body, "usage-data")
    assert data["policies"]["labels"] == ["Compact"]
    assert data["policies"]["turns"] == [2]
    assert data["policies"]["cost"] == [0.02] and data["policies"]["full_history_cost"] == [0.1]


def test_a_policy_page_shows_its_own_last_30_days(admin_client, tenant_a, admin_a):
    own = make_policy(tenant_a, name="Compact")
    other = make_policy(tenant_a, name="Roomy")
    turns(tenant_a, admin_a, own, 2)
    turns(tenant_a, admin_a, own, 1, when=timezone.now() - timedelta(days=45))  # too old
    turns(tenant_a, admin_a, other, 4)

    response = admin_client.get(reverse("admin:chatplatform_contextpolicy_change", args=[own.pk]))
    body = response.content.decode()
    usage = response.context["policy_usage"]
    assert usage.totals.turns == 2 and usage.totals.cost_usd == Decimal("0.020")
    assert len(usage.days) == 30
    assert 'id="policy-usage-days"' in body and 'id="cost-chart"' in body
    data = json_script(body, "usage-data")
    assert sum(data["cost"]) == pytest.approx(0.02) and len(data["labels"]) == 30

    idle = admin_client.get(
        reverse("admin:chatplatform_contextpolicy_change", args=[make_policy(tenant_a).pk])
    )
    assert "No turns used this policy in the last 30 days" in idle.content.decode()


def test_a_preset_page_counts_only_the_admins_tenant(
    admin_client, tenant_a, tenant_b, admin_a, admin_b, preset
):
    turns(tenant_a, admin_a, preset, 1)
    turns(tenant_b, admin_b, preset, 6, cost="2.000")
    response = admin_client.get(
        reverse("admin:chatplatform_contextpolicy_change", args=[preset.pk])
    )
    usage = response.context["policy_usage"]
    assert usage.totals.turns == 1 and usage.totals.cost_usd == Decimal("0.010")
    assert "2.0000" not in response.content.decode()
    # The operator (no tenant list) sees every tenant's turns with the preset.
    assert policy_usage_report(preset, None).totals.turns == 7


def test_another_tenants_policy_counts_nothing_for_an_admin(tenant_a, tenant_b, admin_b):
    theirs = make_policy(tenant_b, name="Theirs")
    turns(tenant_b, admin_b, theirs, 3)
    assert policy_usage_report(theirs, [tenant_a.pk]).totals.turns == 0
