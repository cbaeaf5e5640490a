"""The active policy and the model profiles (read-only)."""

from __future__ import annotations

import pytest

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.api.conftest import API, error_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile_b(tenant_b):
    with tenant_scope(tenant_b):
        return ModelProfile.objects.create(
            tenant=tenant_b,
            name="B's private model",
            provider="openai",
            model="b-model",
            context_window=8192,
            max_output_tokens=1024,
        )


def test_active_policy(client_a, tenant_a):
    body = client_a.get(f"{API}/policy/").json()
    assert body["id"] == tenant_a.active_policy_id and body["name"] == "Hybrid"
    assert body["is_preset"] is True and body["strategy"] == "hybrid"
    assert body["model_profile"]["id"] and "tenant" not in body
    with tenant_scope(tenant_a):
        own = ContextPolicy.objects.get(pk=tenant_a.active_policy_id)
        own.pk = None
        own.tenant = tenant_a
        own.name = "Ours"
        own.save()
    tenant_a.active_policy = own
    tenant_a.save(update_fields=["active_policy"])
    body = client_a.get(f"{API}/policy/").json()
    assert body["name"] == "Ours" and body["is_preset"] is False
    error_of(client_a.post(f"{API}/policy/", {}, format="json"), 405, "method_not_allowed")


def test_model_profiles_are_shared_plus_own(client_a, client_b, profile_b):
    with all_tenants():
        shared = set(ModelProfile.objects.filter(tenant__isnull=True).values_list("pk", flat=True))
    mine = {p["id"] for p in client_a.get(f"{API}/model-profiles/").json()["results"]}
    assert mine == shared
    theirs = client_b.get(f"{API}/model-profiles/").json()["results"]
    assert {p["id"] for p in theirs} == shared | {profile_b.pk}
    own = next(p for p in theirs if p["id"] == profile_b.pk)
    assert own["shared"] is False and own["model"] == "b-model"
    one = next(iter(shared))
    assert client_a.get(f"{API}/model-profiles/{one}/").json()["shared"] is True


def test_another_tenants_model_profile_is_404(client_a, profile_b):
    error_of(client_a.get(f"{API}/model-profiles/{profile_b.pk}/"), 404, "not_found")
    error_of(client_a.get(f"{API}/model-profiles/{10**9}/"), 404, "not_found")
