"""The chat shell in a real browser, on a phone (375 px) and a laptop (1280 px): the
conversation sidebar (new chat, search, rename, archive and restore, delete with a
confirmation, leave), the title made from the first exchange arriving live, the composer
pinned under messages that scroll, the context panel (a drawer on phones: focus moves in,
Escape closes), the header naming the model and the policy, and the colour theme."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from chatplatform.models.conversations import Conversation
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import participant_add
from tests.browser.conftest import log_in, screenshot, watch_csp
from tests.factories import make_conversation, make_member, make_message

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

WIDTHS = [375, 1280]
COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def width(request) -> int:
    return int(request.param)


@pytest.fixture
def shell(browser, live_server_url, width) -> Iterator[Any]:
    phone = width < 760
    context = browser.new_context(
        viewport={"width": width, "height": 812 if phone else 900},
        is_mobile=phone,
        has_touch=phone,
        base_url=live_server_url,
    )
    context.set_default_timeout(15_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    violations = watch_csp(tab)
    yield tab
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert not violations, f"Content-Security-Policy violations: {violations}"


def no_sideways_scroll(page: Any, width: int) -> None:
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"the page scrolls sideways ({scroll}px at {width}px)"


def open_sidebar(page: Any, width: int) -> None:
    """The conversation list: a drawer on phones, a column on wide screens."""
    if width < 760:
        page.click("button[data-drawer-toggle=sidebar]")
        page.wait_for_selector("#sidebar.open")
        page.wait_for_function(
            "() => document.getElementById('sidebar').getBoundingClientRect().left >= 0"
        )
    assert page.locator("#sidebar").is_visible()


def stored(conversation) -> Conversation:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk)


def exists(conversation) -> bool:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.filter(pk=conversation.pk).exists()


def test_new_chat_is_named_by_its_first_exchange_live(shell, width, tenant_a, member_a):
    page = shell
    log_in(page, member_a.username)
    page.goto("/chats/")
    page.click("#new-chat")
    page.wait_for_selector("body.chat-connected")
    assert page.inner_text("h1") == "New chat"
    page.fill("#composer-input", "## How do I keep **basil** alive indoors? It keeps wilting.")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(COMPLETE_REPLY)
    page.wait_for_function(
        "() => document.querySelector('#chat-title').textContent === "
        "'How do I keep basil alive indoors?'"
    )
    assert page.title().startswith("How do I keep basil alive indoors?")
    open_sidebar(page, width)
    current = page.locator(".conv-item.current .conversation-title")
    assert current.inner_text() == "How do I keep basil alive indoors?"
    no_sideways_scroll(page, width)
    screenshot(page, f"50-shell-new-chat-titled-{width}", full_page=False)


def test_search_rename_archive_and_restore(shell, width, tenant_a, member_a):
    page = shell
    trip = make_conversation(tenant_a, member_a, title="Lisbon trip")
    make_conversation(tenant_a, member_a, title="Tax return")
    log_in(page, member_a.username)
    page.goto("/chats/")
    page.fill("#sidebar-q", "lisbon")
    page.press("#sidebar-q", "Enter")
    page.wait_for_url("**/chats/?q=lisbon")
    titles = page.locator("#conversation-list .conversation-title").all_inner_texts()
    assert titles == ["Lisbon trip"]
    screenshot(page, f"51-shell-search-{width}", full_page=False)

    page.click("#conversation-list .conv-link")
    page.wait_for_selector("body.chat-connected")
    # Rename from the header's menu.
    page.click(".chat-tools .conv-menu > summary")
    field = page.locator(f"#head-title-{trip.pk}")
    # The details element's toggle event (which moves the focus) is queued after the click.
    expect(field).to_be_focused()
    field.fill("Lisbon in May")
    menu = page.locator(".chat-tools .conv-menu-body").bounding_box()
    assert menu["x"] >= 0 and menu["x"] + menu["width"] <= width  # the menu is on screen
    screenshot(page, f"52-shell-rename-{width}", full_page=False)
    page.click(".chat-tools .conv-menu button:has-text('Rename')")
    page.wait_for_selector("h1:has-text('Lisbon in May')")
    assert stored(trip).title == "Lisbon in May"

    # Archive: it leaves the list and waits under "Archived".
    page.click(".chat-tools .conv-menu > summary")
    page.click(".chat-tools .conv-menu button:has-text('Archive')")
    page.wait_for_selector(".messages-flash:has-text('is archived')")
    assert stored(trip).archived_at is not None
    page.goto("/chats/")
    assert "Lisbon in May" not in page.locator("#conversation-list").inner_text()
    page.click("text=Archived (1)")
    page.wait_for_url("**/chats/?archived=1")
    assert page.locator("#conversation-list .conversation-title").all_inner_texts() == [
        "Lisbon in May"
    ]
    screenshot(page, f"53-shell-archived-{width}", full_page=False)
    page.click("#conversation-list .conv-menu > summary")
    page.click("#conversation-list .conv-menu button:has-text('Unarchive')")
    page.wait_for_selector(".messages-flash:has-text('is back in your conversations')")
    assert stored(trip).archived_at is None
    no_sideways_scroll(page, width)


def test_delete_asks_first_and_a_member_leaves_instead(shell, width, tenant_a, member_a):
    page = shell
    mine = make_conversation(tenant_a, member_a, title="Old notes")
    colleague = make_member(tenant_a, username="colleague")
    shared = make_conversation(tenant_a, colleague, title="Colleague's plan")
    participant_add(conversation=shared, user=member_a)
    log_in(page, member_a.username)
    page.goto(f"/chats/{mine.pk}/")
    page.wait_for_selector("body.chat-connected")

    questions: list[str] = []

    def answer(dialog: Any, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))
    page.click(".chat-tools .conv-menu > summary")
    page.click(".chat-tools .conv-menu button:has-text('Delete')")
    assert "cannot be undone" in questions[-1]
    assert exists(mine)  # cancelled: nothing happened

    page.once("dialog", lambda dialog: answer(dialog, True))
    page.click(".chat-tools .conv-menu button:has-text('Delete')")
    page.wait_for_url("**/chats/")
    page.wait_for_selector(".messages-flash:has-text('was deleted')")
    assert not exists(mine)
    screenshot(page, f"54-shell-deleted-{width}", full_page=False)

    # Not the creator, not an admin: the menu offers to leave.
    page.goto(f"/chats/{shared.pk}/")
    page.wait_for_selector("body.chat-connected")
    page.click(".chat-tools .conv-menu > summary")
    assert page.locator(".chat-tools .conv-menu button:has-text('Delete')").count() == 0
    page.once("dialog", lambda dialog: answer(dialog, True))
    page.click(".chat-tools .conv-menu button:has-text('Leave')")
    page.wait_for_url("**/chats/")
    assert "the others keep it" in questions[-1]
    assert "Colleague's plan" not in page.locator("#conversation-list").inner_text()
    assert exists(shared)


def test_layout_header_composer_and_context_panel(shell, width, tenant_a, member_a):
    page = shell
    conversation = make_conversation(tenant_a, member_a, title="A long talk")
    for n in range(1, 31):
        make_message(
            conversation, f"Message number {n} with some words to fill a line.", author=member_a
        )
    policy = policy_for(conversation)
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")

    # The header says who answers.
    assert page.inner_text("#chat-model") == policy.model_profile.name
    assert page.inner_text("#chat-policy") == policy.name

    # Messages scroll inside their column; the composer stays at the bottom of the screen.
    viewport = page.viewport_size
    box = page.locator("#composer").bounding_box()
    assert abs(box["y"] + box["height"] - viewport["height"]) <= 2
    scroll = page.evaluate(
        "(() => { const m = document.getElementById('messages');"
        " return [m.scrollHeight, m.clientHeight, m.scrollTop]; })()"
    )
    assert scroll[0] > scroll[1] and scroll[2] > 0  # scrolled to the newest
    assert page.evaluate("document.scrollingElement.scrollHeight") <= viewport["height"]
    no_sideways_scroll(page, width)

    toggle = page.locator("button[data-drawer-toggle=context-panel]")
    panel = page.locator("#context-panel")
    if width >= 1100:
        assert toggle.is_hidden() and panel.is_visible()
        assert panel.bounding_box()["x"] > box["x"]  # a column beside the conversation
        screenshot(page, f"55-shell-layout-{width}", full_page=False)
        return
    # A drawer on phones: closed, out of reach; opens with focus inside; Escape closes it.
    assert panel.evaluate("el => el.inert")
    assert panel.bounding_box()["x"] >= width
    toggle.click()
    page.wait_for_selector("#context-panel.open")
    page.wait_for_function(
        "() => document.getElementById('context-panel').getBoundingClientRect().right <= innerWidth"
    )
    assert toggle.get_attribute("aria-expanded") == "true"
    assert panel.evaluate("el => el.contains(document.activeElement)")
    assert "Context of the last turn" in panel.inner_text()
    screenshot(page, f"55-shell-context-drawer-{width}", full_page=False)
    page.keyboard.press("Escape")
    page.wait_for_selector("#context-panel:not(.open)")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert toggle.evaluate("el => el === document.activeElement")
    assert panel.evaluate("el => el.inert")
    # The conversation list is a drawer too, closed with its button.
    page.click("button[data-drawer-toggle=sidebar]")
    page.wait_for_selector("#sidebar.open")
    page.click("#sidebar [data-drawer-close]")
    page.wait_for_selector("#sidebar:not(.open)")
    no_sideways_scroll(page, width)


def background(page: Any) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_theme_follows_the_system_and_the_choice_sticks(
    browser, live_server_url, width, tenant_a, member_a
):
    context = browser.new_context(
        viewport={"width": width, "height": 800}, base_url=live_server_url, color_scheme="dark"
    )
    page = context.new_page()
    violations = watch_csp(page)
    try:
        conversation = make_conversation(tenant_a, member_a, title="Night owl")
        log_in(page, member_a.username)
        page.goto(f"/chats/{conversation.pk}/")
        page.wait_for_selector("body.chat-connected")
        dark = background(page)
        assert page.input_value("#theme-choice") == "system"
        assert page.get_attribute("html", "data-theme") is None
        screenshot(page, f"56-shell-dark-{width}", full_page=False)

        page.select_option("#theme-choice", "light")
        assert page.get_attribute("html", "data-theme") == "light"
        light = background(page)
        assert light != dark and light == "rgb(246, 247, 249)"
        # The choice is applied before the first paint of the next page (theme.js in <head>).
        page.add_init_script(
            "document.addEventListener('readystatechange', () => {"
            " if (document.readyState === 'interactive')"
            "  window.__themeAtParse = document.documentElement.dataset.theme; });"
        )
        page.reload()
        assert page.evaluate("window.__themeAtParse") == "light"
        assert page.input_value("#theme-choice") == "light"
        screenshot(page, f"57-shell-light-{width}", full_page=False)

        page.select_option("#theme-choice", "system")
        assert page.get_attribute("html", "data-theme") is None
        assert background(page) == dark
        assert page.evaluate("localStorage.getItem('chatplatform-theme')") is None
    finally:
        context.close()
    assert not violations, violations
