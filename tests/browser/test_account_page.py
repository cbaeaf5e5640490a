"""The Account page in a real browser: reached from the header, an export file uploaded and
imported (the job's result shown), an export whose download link appears, and the account
deleted with the password, which ends on the log-in page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tests.browser.conftest import PASSWORD, log_in, screenshot, watch_csp
from tests.transfer.exports import chatgpt_export

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


@pytest.fixture
def jobs_now(monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Any) -> None:
    """The transfer jobs run as soon as they are queued (in the server's thread)."""
    from chats.transfer import followup, tasks

    settings.TRANSFER_ROOT = tmp_path / "transfers"
    monkeypatch.setattr(tasks.run_transfer, "delay", tasks.run_transfer)
    monkeypatch.setattr(followup.process_imported_conversations, "delay", lambda *a: None)


def test_import_export_and_delete_from_the_account_page(
    page: Any, member_a: Any, jobs_now: None
) -> None:
    violations = watch_csp(page)
    log_in(page, member_a.username, PASSWORD)
    page.click("header >> text=Account")
    page.wait_for_selector("h1:has-text('Your account')")
    page.select_option("#id_format", "chatgpt")
    page.set_input_files(
        "#id_file",
        {"name": "conversations.json", "mimeType": "application/json", "buffer": chatgpt_export()},
    )
    page.click("#import-form button[type=submit]")
    page.wait_for_selector("text=2 new conversations, 6 messages added, 0 already there")
    page.click("#export-form button[type=submit]")
    page.wait_for_selector("a.transfer-download")
    screenshot(page, "60-account-page")
    page.click("text=Conversations")
    page.wait_for_selector("text=Lisbon weekend")
    page.click("header >> text=Account")
    page.on("dialog", lambda dialog: dialog.accept())
    page.fill("#id_password", PASSWORD)
    page.fill("#id_confirm", member_a.username)
    page.click("#delete-form button[type=submit]")
    page.wait_for_url("**/accounts/login/**")
    assert not get_user_model().objects.filter(pk=member_a.pk).exists()
    assert violations == []
