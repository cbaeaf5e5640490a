"""Pages under the Content-Security-Policy in a real browser (the ``page`` fixture fails on any
violation Chromium reports): the API docs draw, the form behaviour that used to be inline
handlers still works, and a locked-out log-in gets its page."""

from __future__ import annotations

import pytest

from memory.services import fact_save
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_api_docs_draw_under_the_policy(page):
    response = page.goto("/api/v1/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".opblock-tag", timeout=30_000)  # Swagger UI read the schema
    assert page.locator(".opblock").count() > 10  # the operations are listed
    screenshot(page, "20-api-docs")


def test_deleting_a_fact_asks_first(page, tenant_a, member_a):
    fact_save(tenant_a, member_a, "I live in Lisbon")
    log_in(page, member_a.username)
    page.goto("/memories/")
    questions: list[str] = []

    def answer(dialog, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))
    page.click("#facts button.danger")
    assert "I live in Lisbon" in page.inner_text("#facts")
    page.once("dialog", lambda dialog: answer(dialog, True))
    page.click("#facts button.danger")
    page.wait_for_selector(".messages-flash >> text=Forgotten.")
    assert questions == ["Forget this fact and its earlier versions?"] * 2
    assert "I live in Lisbon" not in page.inner_text("main")


def test_a_locked_out_log_in_gets_its_page(page, tenant_a, member_a, settings):
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        page.goto("/accounts/login/")
        page.fill("#id_username", member_a.username)
        page.fill("#id_password", "wrong")
        page.click("button[type=submit]")
    assert "Too many log-in attempts" in page.inner_text("h1")
    log_in_page = page.goto("/accounts/login/")
    assert log_in_page.status == 200
    page.fill("#id_username", member_a.username)
    page.fill("#id_password", "pw")
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.click("button[type=submit]")
    assert posted.value.status == 429
    screenshot(page, "21-locked-out")
