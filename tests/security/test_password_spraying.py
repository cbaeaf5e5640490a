"""Password spraying: one client address trying a password against many usernames is refused
once its failures name more than ``LOGIN_ADDRESS_USERNAME_LIMIT`` usernames within the
lockout period, on the site's and the admin's log-in pages. The lock is the address's: the
users whose names were tried still log in from elsewhere, and one user mistyping their own
password is left to the per-username lock."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.utils import timezone

from tests.factories import make_member

SPRAY_LIMIT = 4
_addresses = itertools.count(1)

pytestmark = pytest.mark.django_db


@pytest.fixture
def address() -> Any:
    def make() -> str:
        n = next(_addresses)
        return f"203.0.113.{n % 250 + 1}" if n < 250 else f"2001:db8:5::{n:x}"

    return make


@pytest.fixture
def limits(settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 5
    settings.LOGIN_ADDRESS_USERNAME_LIMIT = SPRAY_LIMIT


@pytest.fixture
def users(tenant_a: Any) -> list[Any]:
    return [make_member(tenant_a, username=f"sprayed-{n}") for n in range(SPRAY_LIMIT + 3)]


def log_in(path: str, username: str, password: str, ip: str) -> Any:
    return Client().post(path, {"username": username, "password": password}, REMOTE_ADDR=ip)


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_one_password_against_many_usernames_locks_the_address(path, limits, users, address):
    ip = address()
    for user in users[:SPRAY_LIMIT]:
        assert log_in(path, user.username, "Summer2026!", ip).status_code == 200  # the form
    locked = log_in(path, users[SPRAY_LIMIT].username, "Summer2026!", ip)
    assert locked.status_code == 429
    assert b"different accounts" in locked.content
    assert locked["Retry-After"] == "900"
    # Further tries from the address are refused before any password is checked, the right
    # one included, for any username.
    for user in users[SPRAY_LIMIT + 1 :]:
        assert log_in(path, user.username, "pw", ip).status_code == 429
    assert "_auth_user_id" not in log_in(path, users[0].username, "pw", ip).wsgi_request.session


def test_the_users_tried_are_not_locked_out_of_their_accounts(limits, users, address):
    ip = address()
    for user in users:
        log_in("/accounts/login/", user.username, "Summer2026!", ip)
    assert log_in("/accounts/login/", users[0].username, "pw", ip).status_code == 429
    elsewhere = address()
    for user in users:
        assert log_in("/accounts/login/", user.username, "pw", elsewhere).status_code == 302


def test_one_user_mistyping_their_password_is_not_an_address_lock(limits, users, address):
    ip = address()
    for _ in range(4):  # below the per-username limit of 5
        assert log_in("/accounts/login/", users[0].username, "typo", ip).status_code == 200
    assert log_in("/accounts/login/", users[0].username, "pw", ip).status_code == 302
    # Up to the limit of distinct usernames, each failing once, nobody is locked.
    for user in users[1:SPRAY_LIMIT]:
        assert log_in("/accounts/login/", user.username, "typo", ip).status_code == 200
    assert log_in("/accounts/login/", users[1].username, "pw", ip).status_code == 302


def test_the_address_lock_ends_with_the_lockout_period(limits, users, address):
    ip = address()
    for user in users:
        log_in("/accounts/login/", user.username, "Summer2026!", ip)
    assert log_in("/accounts/login/", users[0].username, "pw", ip).status_code == 429
    AccessAttempt.objects.filter(ip_address=ip).update(
        attempt_time=timezone.now() - dt.timedelta(minutes=16)
    )
    assert log_in("/accounts/login/", users[0].username, "pw", ip).status_code == 302
