"""Password reset from the log-in page: a link by e-mail (console by default), used once, and
the same answer whether or not an account uses the address. After log-in the user lands in
their chats."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.core import mail
from django.core.cache import cache
from django.urls import reverse

pytestmark = pytest.mark.django_db

LINK = re.compile(r"https?://[^/\s]+(/accounts/reset/\S+/)")


@pytest.fixture(autouse=True)
def _fresh_limits():
    """The limits count per client and address in the shared cache: each test starts at 0."""
    cache.clear()
    yield
    cache.clear()


def ask_for_a_link(client, address: str):
    return client.post(reverse("password_reset"), {"email": address}, follow=True)


def test_the_log_in_page_links_to_the_password_reset(client):
    page = client.get(reverse("login")).content.decode()
    assert reverse("password_reset") in page and "Forgot your password?" in page


def test_a_member_resets_their_password_with_the_e_mailed_link(client, member_a):
    member_a.email = "ana@example.com"
    member_a.save()
    answer = ask_for_a_link(client, "ana@example.com")
    assert b"Check your e-mail" in answer.content
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["ana@example.com"]
    link = LINK.search(str(mail.outbox[0].body))
    assert link is not None, mail.outbox[0].body
    form = client.get(link.group(1), follow=True)
    assert b"Choose a new password" in form.content
    new = "a-new-long-passphrase-42"
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new}, follow=True
    )
    assert b"Password changed" in done.content
    again = client.get(link.group(1), follow=True)
    assert b"This link no longer works" in again.content
    logged_in = client.post(
        reverse("login"), {"username": member_a.username, "password": new}, follow=True
    )
    assert logged_in.redirect_chain[-1][0] == reverse("chats_ui:conversation_list")


def test_an_unknown_address_gets_the_same_answer_and_no_mail(client):
    answer = ask_for_a_link(client, "nobody@example.com")
    assert b"Check your e-mail" in answer.content and mail.outbox == []


def test_e_mail_goes_to_the_console_unless_a_server_is_configured():
    # The test runner swaps in its in-memory outbox; the configured default is the console.
    from config import settings as configured

    backend = getattr(configured, "EMAIL_BACKEND")  # noqa: B009  (set from EMAIL_URL)
    assert backend == "django.core.mail.backends.console.EmailBackend"
    assert settings.DEFAULT_FROM_EMAIL


def test_an_address_gets_a_few_links_an_hour_and_the_page_says_nothing_more(
    client, member_a, settings
):
    member_a.email = "ana@example.com"
    member_a.save()
    settings.PASSWORD_RESET_ADDRESS_LIMIT = 2
    for _ in range(4):
        answer = ask_for_a_link(client, "ana@example.com")
        assert b"Check your e-mail" in answer.content
    assert len(mail.outbox) == 2


def test_a_client_asking_for_too_many_links_is_told_to_wait(client, settings):
    settings.PASSWORD_RESET_CLIENT_LIMIT = 3
    for _ in range(3):
        assert ask_for_a_link(client, "someone@example.com").status_code == 200
    refused = client.post(reverse("password_reset"), {"email": "someone@example.com"})
    assert refused.status_code == 429 and b"Too many requests" in refused.content


def test_a_malformed_address_is_told_so_and_sends_nothing(client):
    answer = client.post(reverse("password_reset"), {"email": "not an address"})
    assert answer.status_code == 200 and b"Enter a valid e-mail address." in answer.content
    assert mail.outbox == []
    long = client.post(reverse("password_reset"), {"email": "a" * 300 + "@example.com"})
    assert long.status_code == 200 and mail.outbox == []
