"""Authentication, tenant scope, throttling, size limits, and the one error format."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from chatplatform.services import api_key_revoke
from chatplatform.tenancy.scoping import active_tenant_ids
from chats.api.throttling import KeyRateThrottle, UserRateThrottle
from tests.api.conftest import API, error_of, key_client
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_no_credentials_is_401_with_a_bearer_challenge(db):
    response = APIClient().get(f"{API}/conversations/")
    error_of(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Bearer cpk_nope_nope", "Bearer", "Bearer a b", "Bearer not-a-key", "Bearer \u00e9"],
)
def test_bad_keys_are_401(tenant_a, header):
    client = APIClient()
    response = client.get(f"{API}/me/", HTTP_AUTHORIZATION=header)
    error_of(response, 401, "authentication_failed")


def test_revoked_key_is_401(tenant_a, member_a):
    from chatplatform.services import api_key_create

    key, raw = api_key_create(tenant=tenant_a, name="soon gone", user=member_a)
    assert key_client(raw).get(f"{API}/me/").status_code == 200
    api_key_revoke(key=key)
    error_of(key_client(raw).get(f"{API}/me/"), 401, "authentication_failed")


def test_key_principal_and_scope(client_a, tenant_a, monkeypatch):
    seen = []
    from chats.api.views import platform

    original = platform.MeView.get

    def spy(self, request):
        seen.append(active_tenant_ids())
        return original(self, request)

    monkeypatch.setattr(platform.MeView, "get", spy)
    body = client_a.get(f"{API}/me/").json()
    assert body["tenant"]["id"] == tenant_a.pk and body["username"] == "member-a"
    assert body["auth"] == "api_key" and body["is_admin"] is False
    assert seen == [[tenant_a.pk]]
    assert active_tenant_ids() is None  # left when the request ended


def test_admin_key_is_admin(admin_client_a):
    assert admin_client_a.get(f"{API}/me/").json()["is_admin"] is True


def test_session_authentication_uses_the_middleware_tenant(member_a, tenant_a):
    client = APIClient()
    client.force_login(member_a)
    body = client.get(f"{API}/me/").json()
    assert body == {
        "tenant": {"id": tenant_a.pk, "name": tenant_a.name, "slug": tenant_a.slug},
        "username": "member-a",
        "is_admin": False,
        "auth": "session",
        "key_prefix": None,
    }


def test_session_writes_need_the_csrf_token(member_a):
    client = Client(enforce_csrf_checks=True)
    client.force_login(member_a)
    response = client.post(f"{API}/conversations/", {"title": "x"}, content_type="application/json")
    error = error_of(response, 403, "permission_denied")
    assert "CSRF" in error["message"]
    client.get("/accounts/login/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(
        f"{API}/conversations/",
        {"title": "x"},
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 201


def test_session_user_without_a_tenant_is_403(db):
    client = APIClient()
    loner: Any = UserFactory()
    client.force_login(loner)
    error_of(client.get(f"{API}/me/"), 403, "permission_denied")


def test_unknown_paths_and_methods_answer_json(client_a):
    error_of(client_a.get(f"{API}/nothing-here/"), 404, "not_found")
    error_of(client_a.get(f"{API}/conversations/abc/"), 404, "not_found")
    response = client_a.put(f"{API}/me/", {}, format="json")
    error_of(response, 405, "method_not_allowed")


def test_unacceptable_media_type_is_406(client_a):
    response = client_a.get(f"{API}/conversations/", HTTP_ACCEPT="text/event-stream")
    error_of(response, 406, "not_acceptable")


def test_bad_bodies(client_a):
    url = f"{API}/conversations/"
    error_of(client_a.post(url, "title=x", content_type="text/plain"), 415)
    error_of(client_a.post(url, "{not json", content_type="application/json"), 400, "parse_error")
    error_of(client_a.post(url, "NaN", content_type="application/json"), 400, "parse_error")
    error = error_of(client_a.post(url, [1, 2], format="json"), 400, "invalid")
    assert error["fields"] == {"non_field_errors": ["Send a JSON object."]}
    error = error_of(client_a.post(url, {"title": "x" * 201}, format="json"), 400, "invalid")
    assert list(error["fields"]) == ["title"]


def test_request_body_limit_is_413(client_a, settings):
    settings.API_MAX_BODY_BYTES = 100
    body = {"title": "x" * 200}
    error = error_of(client_a.post(f"{API}/conversations/", body, format="json"), 413)
    assert error["code"] == "too_large"


def test_body_limit_also_holds_without_a_content_length(client_a, settings):
    from io import BytesIO

    from chats.api.errors import RequestTooLarge
    from chats.api.parsers import LimitedJSONParser

    settings.API_MAX_BODY_BYTES = 10
    with pytest.raises(RequestTooLarge):
        LimitedJSONParser().parse(BytesIO(b'{"title": "0123456789"}'))
    assert LimitedJSONParser().parse(BytesIO(b'{"a": 1}')) == {"a": 1}


def _rates(settings, **rates):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_key": "1000/min", "api_user": "1000/min", **rates},
    }


def test_requests_are_throttled_per_key(client_a, admin_client_a, settings):
    _rates(settings, api_key="3/min")
    for _ in range(3):
        assert client_a.get(f"{API}/me/").status_code == 200
    response = client_a.get(f"{API}/me/")
    error_of(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0
    assert admin_client_a.get(f"{API}/me/").status_code == 200  # another key, own budget


def test_requests_are_throttled_per_user_across_credentials(tenant_a, member_a, key_a, settings):
    from django.core.cache import cache

    _rates(settings, api_user="2/min")
    cache.delete(f"throttle_api_user_t{tenant_a.pk}:u{member_a.pk}")
    session = APIClient()
    session.force_login(member_a)
    assert key_client(key_a).get(f"{API}/me/").status_code == 200
    assert session.get(f"{API}/me/").status_code == 200
    error_of(session.get(f"{API}/me/"), 429, "throttled")


def test_throttle_identities():
    assert KeyRateThrottle.scope == "api_key" and UserRateThrottle.scope == "api_user"


def test_unexpected_errors_are_a_json_500(client_a, monkeypatch):
    from chats.api.views import platform

    def boom(self, request):
        raise RuntimeError("kaput")

    monkeypatch.setattr(platform.MeView, "get", boom)
    error = error_of(client_a.get(f"{API}/me/"), 500, "internal_error")
    assert "kaput" not in error["message"]
