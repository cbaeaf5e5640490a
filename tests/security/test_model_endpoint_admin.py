"""The tenant admin's side of model endpoints: the admin form refuses endpoints the operator
does not allow, and the tenant's own API key is write-only (never shown back, in the admin or
the API) and stored encrypted."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.views.debug import SafeExceptionReporterFilter
from rest_framework.test import APIClient

from chatplatform.models import MembershipRole, ModelProfile
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.security.model_endpoints import TENANT_KEY, allow_local_endpoints, make_profile

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(admin_a) -> Client:
    client = Client()
    client.force_login(admin_a)
    return client


def form_data(tenant: Any, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tenant": tenant.pk if tenant is not None else "",
        "name": "Our own model",
        "provider": "openai",
        "model": "llama3",
        "base_url": "",
        "context_window": 8000,
        "max_output_tokens": 1000,
        "tokenizer": "estimator",
        "supports_tools": "on",
        "price_input_per_mtok": "0",
        "price_output_per_mtok": "0",
        "price_cache_read_per_mtok": "0",
        "price_cache_write_per_mtok": "0",
        "price_cache_write_1h_per_mtok": "0",
        "cache_min_tokens": "1024",
        "is_active": "on",
        "api_key": "",
    }
    data.update(overrides)
    return data


def saved(tenant: Any, name: str = "Our own model") -> ModelProfile | None:
    with tenant_scope(tenant):
        return ModelProfile.objects.filter(name=name).first()


def field_errors(response: Any, field: str) -> list[str]:
    assert response.status_code == 200, response.status_code  # the form came back
    return list(response.context["adminform"].form.errors.get(field, []))


def test_without_an_allow_list_tenants_cannot_name_an_endpoint(admin_client, tenant_a):
    url = "https://llm.example.com/v1"
    response = admin_client.post(
        reverse("admin:chatplatform_modelprofile_add"), form_data(tenant_a, base_url=url)
    )
    assert "does not allow tenants" in " ".join(field_errors(response, "base_url"))
    assert saved(tenant_a) is None


def test_a_host_off_the_allow_list_is_refused(admin_client, tenant_a, settings):
    settings.TENANT_MODEL_HOSTS = ["llm.example.com"]
    response = admin_client.post(
        reverse("admin:chatplatform_modelprofile_add"),
        form_data(tenant_a, base_url="https://attacker.example.net/v1", api_key=TENANT_KEY),
    )
    assert "not on the operator's list" in " ".join(field_errors(response, "base_url"))
    assert saved(tenant_a) is None


@pytest.mark.parametrize(
    "base_url", ["http://127.0.0.1:11434/v1", "http://169.254.169.254/latest/meta-data/"]
)
def test_private_addresses_are_refused_unless_allowed(admin_client, tenant_a, settings, base_url):
    settings.TENANT_MODEL_HOSTS = ["127.0.0.1", "169.254.169.254"]
    settings.TENANT_MODEL_ALLOW_HTTP = True
    response = admin_client.post(
        reverse("admin:chatplatform_modelprofile_add"), form_data(tenant_a, base_url=base_url)
    )
    assert "private or reserved" in " ".join(field_errors(response, "base_url"))
    assert saved(tenant_a) is None


def test_http_is_refused_unless_allowed(admin_client, tenant_a, settings):
    allow_local_endpoints(settings)
    settings.TENANT_MODEL_ALLOW_HTTP = False
    response = admin_client.post(
        reverse("admin:chatplatform_modelprofile_add"),
        form_data(tenant_a, base_url="http://127.0.0.1:11434/v1"),
    )
    assert "https" in " ".join(field_errors(response, "base_url"))


def test_a_key_without_an_endpoint_of_its_own_is_refused(admin_client, tenant_a):
    response = admin_client.post(
        reverse("admin:chatplatform_modelprofile_add"), form_data(tenant_a, api_key=TENANT_KEY)
    )
    assert field_errors(response, "api_key")
    assert saved(tenant_a) is None


def test_the_own_key_is_stored_encrypted_and_never_shown_back(admin_client, tenant_a, settings):
    allow_local_endpoints(settings)
    response = admin_client.post(
        reverse("admin:chatplatform_modelprofile_add"),
        form_data(tenant_a, base_url="http://127.0.0.1:11434/v1", api_key=TENANT_KEY),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    reported = SafeExceptionReporterFilter().get_post_parameters(response.wsgi_request)
    assert reported["api_key"] != TENANT_KEY  # an error report would not show it
    profile = saved(tenant_a)
    assert profile is not None
    assert TENANT_KEY not in profile.api_key_encrypted
    assert profile.own_api_key() == TENANT_KEY
    change_url = reverse("admin:chatplatform_modelprofile_change", args=[profile.pk])
    page = admin_client.get(change_url).content.decode()
    assert TENANT_KEY not in page and profile.api_key_encrypted not in page
    assert "set (not shown)" in page
    # Saving again without typing the key keeps it; the clear box removes it.
    data = form_data(tenant_a, base_url="http://127.0.0.1:11434/v1", model="llama3.1")
    assert admin_client.post(change_url, data).status_code == 302
    profile.refresh_from_db()
    assert profile.model == "llama3.1" and profile.own_api_key() == TENANT_KEY
    assert admin_client.post(change_url, {**data, "clear_api_key": "on"}).status_code == 302
    profile.refresh_from_db()
    assert not profile.has_own_api_key


def test_removing_the_endpoint_drops_the_own_key(admin_client, tenant_a, settings):
    allow_local_endpoints(settings)
    profile = make_profile(tenant_a, base_url="http://127.0.0.1:11434/v1", key=TENANT_KEY)
    data = form_data(tenant_a, name=profile.name, tokenizer="o200k_base")
    change_url = reverse("admin:chatplatform_modelprofile_change", args=[profile.pk])
    assert admin_client.post(change_url, data).status_code == 302
    profile.refresh_from_db()
    assert profile.base_url == "" and not profile.has_own_api_key


def test_the_api_never_returns_the_key(tenant_a, admin_a, settings):
    allow_local_endpoints(settings)
    profile = make_profile(tenant_a, base_url="http://127.0.0.1:11434/v1", key=TENANT_KEY)
    _, raw = api_key_create(tenant=tenant_a, name="k", user=admin_a, role=MembershipRole.ADMIN)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for url in ("/api/v1/model-profiles/", f"/api/v1/model-profiles/{profile.pk}/"):
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert str(profile.pk) in body
        assert TENANT_KEY not in body and profile.api_key_encrypted not in body
        assert "api_key" not in body


def test_a_superuser_cannot_give_a_platform_profile_a_key(client, settings):
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    data = form_data(None, api_key=TENANT_KEY, base_url="https://llm.example.com/v1")
    response = client.post(reverse("admin:chatplatform_modelprofile_add"), data)
    assert field_errors(response, "api_key")
    with all_tenants():
        assert not ModelProfile.objects.filter(name="Our own model").exists()
