"""Hostile query parameters on the pages: page numbers and ids far out of range, and a NUL in
the search, answer a page (or an empty result), never a server error. PostgreSQL refuses a NUL
in text and offsets beyond 64 bits; SQLite refuses integers beyond 64 bits."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chats.services import message_create
from memory.services import fact_save
from tests.ui.conftest import answered_turn

pytestmark = pytest.mark.django_db

HUGE = ["999999999999", "9" * 23, "-" + "9" * 23, "9" * 5000, "-1", "0"]


#: A page past the end is empty; a page below 1, or a number too long to read, is the first.
PAGES: list[tuple[str, list[str]]] = [(n, []) for n in HUGE[:2]] + [
    (n, ["Likes tea"]) for n in HUGE[2:]
]


@pytest.mark.parametrize(("number", "listed"), PAGES, ids=lambda n: str(n)[:12] + f"({len(n)})")
def test_memory_pages_out_of_range(member_client, tenant_a, member_a, number, listed):
    fact_save(tenant_a, member_a, "Likes tea")
    response = member_client.get(reverse("chats_ui:memory_list"), {"page": number})
    assert response.status_code == 200
    assert [f.text for f in response.context["facts"].items] == listed


@pytest.mark.parametrize("number", HUGE, ids=lambda n: n[:12] + f"({len(n)})")
def test_meter_and_chat_with_ids_out_of_range(member_client, conversation_a, member_a, number):
    answered_turn(conversation_a, member_a, "hello")
    meter = member_client.get(
        reverse("chats_ui:turn_meter", args=[conversation_a.pk]), {"message": number}
    )
    assert meter.status_code == 200
    assert meter.json() == {"meter": None}
    detail = reverse("chats_ui:conversation_detail", args=[conversation_a.pk])
    for name in ("before", "around"):
        assert member_client.get(detail, {name: number}).status_code == 200


def test_a_nul_in_the_search_is_no_server_error(member_client, conversation_a, member_a):
    message_create(conversation=conversation_a, role="user", content="boil an egg", author=member_a)
    url = reverse("chats_ui:conversation_list")
    for query in ("\x00", "egg\x00", "\x00egg\x00"):
        response = member_client.get(url, {"q": query})
        assert response.status_code == 200
        assert [r.conversation.pk for r in response.context["rows"]] == [conversation_a.pk]
