"""Every resource a page loads exists, in a real browser at a phone's width and a laptop's: no
page asks for anything that answers 404 (or any error), the site's icon included: the pages
link an SVG icon, and /favicon.ico, which browsers ask for on their own, leads to it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import AT_BOTH_WIDTHS, log_in
from tests.factories import make_conversation, make_message, png_image

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
    AT_BOTH_WIDTHS,
]

REPLY = "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint('hello')\n```"


def watch_errors(page: Any) -> list[str]:
    """Every response of ``page`` (and its frames, the icon included) that is an error, and
    every request that failed for another reason than the browser cancelling it."""
    failures: list[str] = []

    def seen(response: Any) -> None:
        if response.status >= 400:
            failures.append(f"{response.status} {response.url}")

    def failed(request: Any) -> None:
        # A request the browser cancelled itself (the page moved on before its icon came) is
        # not a missing resource: that shows as an error status, or as any other failure.
        reason = request.failure or ""
        if "ERR_ABORTED" not in reason:
            failures.append(f"failed {request.url} ({reason})")

    page.on("response", seen)
    page.on("requestfailed", failed)
    return failures


#: The icon a browser asks for on this page: the one it links, else /favicon.ico.
ICON = """() => {
  const link = document.querySelector('link[rel~=icon]');
  return link ? link.href : new URL('/favicon.ico', location.href).href;
}"""


def visit(page: Any, path: str, failures: list[str]) -> None:
    """Load ``path``, and its icon as the browser does (Playwright does not report the
    browser's own icon requests to the page)."""
    page.goto(path)
    page.wait_for_load_state("networkidle")
    icon = page.request.get(page.evaluate(ICON))
    if icon.status >= 400:
        failures.append(f"{icon.status} {icon.url} (the icon)")


def test_no_page_asks_for_a_missing_resource(page, tenant_a, admin_a):
    conversation = make_conversation(tenant_a, admin_a, title="Resources")
    question = make_message(conversation, "Show me", author=admin_a, image=png_image())
    make_message(conversation, REPLY, role="assistant", answers=question)
    failures = watch_errors(page)

    for path in ("/accounts/login/", "/accounts/password_reset/"):
        visit(page, path, failures)
    log_in(page, admin_a.username)
    for path in (
        "/",
        "/chats/",
        "/chats/new/",
        f"/chats/{conversation.pk}/",
        f"/chats/{conversation.pk}/summaries/",
        "/memories/",
        "/admin/",
    ):
        visit(page, path, failures)
        assert not failures, f"{path} asked for what is not there: {failures}"
    assert not failures, failures


def test_the_site_icon_is_served(page):
    page.goto("/accounts/login/")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon and icon.endswith(".svg")
    served = page.request.get(icon)
    assert served.status == 200
    assert served.headers["content-type"].startswith("image/svg+xml")
    assert served.body().startswith(b"<svg")

    asked = page.request.get("/favicon.ico", max_redirects=0)
    assert asked.status == 302 and asked.headers["location"] == icon
    assert page.request.get("/favicon.ico").status == 200

    page.goto("/admin/login/")
    assert page.locator("link[rel=icon]").get_attribute("href") == icon
