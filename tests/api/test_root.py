"""``GET /api/v1/``: the API's endpoints, the schema and the docs, for anyone; it names no
tenant's data, so every caller gets the same answer."""

from __future__ import annotations

import pytest
from django.urls import resolve
from rest_framework.test import APIClient

from chats.api import urls as api_urls
from tests.api.conftest import API

pytestmark = pytest.mark.django_db


def test_the_root_lists_every_endpoint_with_its_methods(presets: None) -> None:
    response = APIClient().get(f"{API}/")
    assert response.status_code == 200
    body = response.json()
    assert body["schema"] == f"{API}/schema/" and body["docs"] == f"{API}/docs/"
    assert "Bearer" in body["authentication"]
    by_name = {endpoint["name"]: endpoint for endpoint in body["endpoints"]}
    assert by_name["conversations"] == {
        "name": "conversations",
        "path": f"{API}/conversations/",
        "methods": ["GET", "POST"],
    }
    assert by_name["turn-record"]["path"] == (
        f"{API}/conversations/{{conversation_id}}/messages/{{message_id}}/context/"
    )
    routes = {p.name for p in api_urls.urlpatterns} - {"root", "not-found"}
    assert set(by_name) == routes
    for endpoint in body["endpoints"]:
        assert endpoint["methods"], endpoint
        path = endpoint["path"].replace("{conversation_id}", "1").replace("{message_id}", "2")
        path = path.replace("{fact_id}", "3").replace("{profile_id}", "4").replace("{key}", "k")
        path = path.replace("{export_id}", "5")
        assert "{" not in path, endpoint
        assert resolve(path).url_name == endpoint["name"]


def test_a_callers_key_changes_nothing_and_a_bad_one_is_not_refused(client_a) -> None:
    anonymous = APIClient().get(f"{API}/")
    keyed = client_a.get(f"{API}/")
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer cpk_nothing_here")
    assert keyed.status_code == anonymous.status_code == bad.get(f"{API}/").status_code == 200
    assert keyed.json() == anonymous.json()
