"""Fixtures of the API tests: keys and clients per tenant, conversations, helpers."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from chatplatform.models import MembershipRole
from chatplatform.services import api_key_create
from tests.api.live_server import in_process_server, live_url  # noqa: F401  (the live server)
from tests.fakes.fixtures import (  # noqa: F401  (fixtures of the fake model server)
    fake_anthropic,
    fake_anthropic_server,
)

API = "/api/v1"


def key_client(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def key_a(tenant_a, member_a) -> str:
    return api_key_create(tenant=tenant_a, name="member a", user=member_a)[1]


@pytest.fixture
def admin_key_a(tenant_a, admin_a) -> str:
    return api_key_create(tenant=tenant_a, name="admin a", user=admin_a, role=MembershipRole.ADMIN)[
        1
    ]


@pytest.fixture
def key_b(tenant_b, member_b) -> str:
    return api_key_create(tenant=tenant_b, name="member b", user=member_b)[1]


@pytest.fixture
def client_a(key_a) -> APIClient:
    return key_client(key_a)


@pytest.fixture
def admin_client_a(admin_key_a) -> APIClient:
    return key_client(admin_key_a)


@pytest.fixture
def client_b(key_b) -> APIClient:
    return key_client(key_b)


def error_of(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The error object of a JSON error response, after checking status, shape and code."""
    assert response.status_code == status, (response.status_code, _body(response))
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "fields"}
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error


def _body(response: Any) -> Any:
    try:
        return response.json()
    except Exception:
        return getattr(response, "content", b"")[:500]
