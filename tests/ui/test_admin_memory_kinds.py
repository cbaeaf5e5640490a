"""The admin shows memories of every kind: the UserFact list has a kind column and filter,
the policy form has the standing instructions' budget, switch and limit."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models import ContextPolicy
from chatplatform.tenancy.scoping import all_tenants
from memory.services import fact_save

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin_a):
    client.force_login(admin_a)
    return client


def test_memories_are_listed_and_filtered_by_kind(
    admin_client, tenant_a, member_a, tenant_b, member_b
):
    fact = fact_save(tenant_a, member_a, "Lives in Lisbon")
    rule = fact_save(tenant_a, member_a, "From now on, answer in Spanish", kind="instruction")
    foreign = fact_save(tenant_b, member_b, "Always answer in haiku", kind="instruction")
    url = reverse("admin:memory_userfact_changelist")
    page = admin_client.get(url).content.decode()
    assert "column-kind" in page and "By kind" in page
    assert f"/{fact.pk}/change/" in page and f"/{rule.pk}/change/" in page
    only = admin_client.get(url, {"kind__exact": "instruction"}).content.decode()
    assert f"/{rule.pk}/change/" in only and f"/{fact.pk}/change/" not in only
    assert f"/{foreign.pk}/change/" not in only  # another tenant's


def test_the_policy_form_has_the_instructions_budget_and_switch(admin_client):
    with all_tenants():
        hybrid = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid")
    page = admin_client.get(
        reverse("admin:chatplatform_contextpolicy_change", args=[hybrid.pk])
    ).content.decode()
    assert "Standing instructions and preferences" in page
    for field in ("instructions_budget", "instructions_enabled", "max_instructions_per_user"):
        assert f"field-{field}" in page, field
    assert page.index("field-system_budget") < page.index("field-instructions_budget")
    assert page.index("field-instructions_budget") < page.index("field-facts_budget")
