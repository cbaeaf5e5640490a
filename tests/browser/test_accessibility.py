"""axe-core on the main pages: no violation of impact serious or critical on the log-in page,
a conversation (with Markdown, code, a long paste and the message actions), the conversation
list, the memories page and the admin's policy list and change page."""

from __future__ import annotations

import pytest

from chats.services import conversation_create
from tests.browser.accessibility import axe_violations, blocking
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot
from tests.factories import make_message, make_policy

pytestmark = [
    pytest.mark.browser,
    AT_BOTH_WIDTHS,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


REPLY = """A table:

| a | b |
|---|---|
| 1 | 2 |

```python
print("hi")
```
"""


def assert_accessible(page, name: str) -> None:
    found = blocking(axe_violations(page))
    screenshot(page, f"a11y-{name}")
    assert found == [], f"{name}: {found}"


def test_the_checker_finds_a_real_violation(page, live_server_url):
    page.goto("/accounts/login/")
    page.evaluate("document.querySelector('#id_username').removeAttribute('id')")
    page.evaluate("document.querySelectorAll('label').forEach(l => l.remove())")
    ids = {v["id"] for v in blocking(axe_violations(page))}
    assert "label" in ids


def test_log_in_page(page, live_server_url):
    page.goto("/accounts/login/")
    assert_accessible(page, "login")


def test_chat_conversation_list_and_memories(page, tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Checked")
    question = make_message(
        conversation, "\n".join(f"pasted line {n}" for n in range(40)), author=member_a
    )
    make_message(conversation, REPLY, role="assistant", answers=question)
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    page.wait_for_selector("li.msg-assistant .msg-actions")
    assert_accessible(page, "chat")
    page.goto("/chats/")
    assert_accessible(page, "conversation-list")
    page.goto("/memories/")
    assert_accessible(page, "memories")


def test_admin_policy_list_and_change_page(page, tenant_a, admin_a):
    policy = make_policy(tenant_a, name="Checked policy")
    log_in(page, admin_a.username)
    page.goto("/admin/chatplatform/contextpolicy/")
    assert_accessible(page, "admin-policy-list")
    page.goto(f"/admin/chatplatform/contextpolicy/{policy.pk}/change/")
    assert_accessible(page, "admin-policy-change")
