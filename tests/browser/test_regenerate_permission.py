"""Regenerate in a group conversation, in a real browser: the button shows on the last reply
only to the author of the message it answers and to a tenant admin, never to another member
(whose request the server would refuse anyway); and the page carries no other member's client
ids. At a phone's width and a laptop's."""

from __future__ import annotations

import pytest

from chats.services import conversation_create
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot
from tests.factories import make_admin, make_member, make_message

pytestmark = [
    pytest.mark.browser,
    AT_BOTH_WIDTHS,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

REGENERATE = "Regenerate this reply"


@pytest.fixture
def group(tenant_a):
    alice = make_member(tenant_a, username="alice")
    mallory = make_member(tenant_a, username="mallory")
    boss = make_admin(tenant_a, username="boss")
    conversation = conversation_create(
        tenant=tenant_a, created_by=alice, title="Group", participants=[mallory, boss]
    )
    question = make_message(conversation, "Alice asks", author=alice, client_id="alice-secret-id")
    make_message(conversation, "The answer", role="assistant", answers=question)
    return conversation


def open_as(page, username: str, conversation) -> None:
    log_in(page, username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")


def test_another_member_gets_no_regenerate_button(page, group):
    open_as(page, "mallory", group)
    # The actions are drawn when the page's scripts start, before the socket connects.
    reply = page.locator("li.msg-assistant").last
    assert reply.get_by_role("button", name=REGENERATE).count() == 0
    assert page.locator("li.msg-user").last.get_by_role("button", name="Edit").count() == 0
    assert "alice-secret-id" not in page.content()
    screenshot(page, "regenerate-other-member")

    # Her own exchange, once answered, has both.
    page.fill("#composer-input", "Mallory asks")
    page.press("#composer-input", "Enter")
    page.wait_for_selector("li.msg-assistant[data-status=complete] >> nth=1")
    page.locator("li.msg-assistant").last.get_by_role("button", name=REGENERATE).wait_for()
    assert page.locator("li.msg-user").last.get_by_role("button", name="Edit").count() == 1


@pytest.mark.parametrize("username", ["alice", "boss"])
def test_the_author_and_a_tenant_admin_get_it(page, group, username):
    open_as(page, username, group)
    reply = page.locator("li.msg-assistant").last
    reply.get_by_role("button", name=REGENERATE).wait_for()
    edits = page.locator("li.msg-user").last.get_by_role("button", name="Edit").count()
    assert edits == (1 if username == "alice" else 0)
