"""Cursor pagination under hostile input: an edited cursor (a position that is not a value of
the ordering field, beyond 64 bits, with a NUL) is an invalid cursor (404), and a page size of
any length is capped; never a server error, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import base64

import pytest

from chats.services import conversation_create
from tests.api.conftest import API, error_of
from tests.api.helpers import add_message

pytestmark = pytest.mark.django_db

POSITIONS = [
    "9" * 23,
    "-" + "9" * 23,
    "9" * 5000,
    "abc",
    "\x00",
    "1\x00",
    "2024-99-99",
    "10000-01-01 00:00:00",
]


def cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


@pytest.fixture
def lists(client_a, tenant_a, member_a):
    for i in range(2):
        conversation_create(tenant=tenant_a, created_by=member_a, title=f"c{i}")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="t")
    for i in range(3):
        add_message(conversation, member_a, f"m{i}")
    return [f"{API}/conversations/", f"{API}/conversations/{conversation.pk}/messages/"]


@pytest.mark.parametrize("position", POSITIONS, ids=lambda p: repr(p[:12]) + f"({len(p)})")
@pytest.mark.parametrize("reverse", ["0", "1"])
def test_an_edited_cursor_is_an_invalid_cursor(client_a, lists, position, reverse):
    for url in lists:
        response = client_a.get(url, {"cursor": cursor(f"r={reverse}&p={position}")})
        error_of(response, 404, "not_found")


def test_the_cursors_the_api_hands_out_still_work(client_a, lists):
    for url in lists:
        first = client_a.get(url, {"page_size": 1}).json()
        second = client_a.get(first["next"]).json()
        assert second["results"] and second["results"] != first["results"]
        back = client_a.get(second["previous"]).json()
        assert back["results"] == first["results"]


@pytest.mark.parametrize("size", ["9" * 30, "9" * 5000, "0" * 40 + "2"])
def test_a_page_size_of_any_length_is_capped(client_a, lists, size):
    for url in lists:
        response = client_a.get(url, {"page_size": size})
        assert response.status_code == 200, response.content[:300]
    assert len(client_a.get(lists[1], {"page_size": "0" * 40 + "2"}).json()["results"]) == 2
    error_of(client_a.get(lists[1], {"page_size": "0" * 40}), 400)
