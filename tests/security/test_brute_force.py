"""Brute-force protection: log-in lockouts (site and admin, django-axes) and the limit on failed
API-key look-ups per client address (REST API and WebSocket handshake)."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from axes.models import AccessAttempt
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from chatplatform.bruteforce import _counter_key, failure_rate
from chatplatform.client_address import client_ip, scope_client_ip
from chatplatform.services import api_key_create
from chats.services import conversation_create
from config.asgi import application
from tests.factories import make_admin

API_ME = "/api/v1/me/"
LIMIT = 3
_addresses = itertools.count(1)


@pytest.fixture
def address() -> Any:
    """Fresh client addresses (documentation ranges) with no failures counted yet (the cache
    outlives a test)."""

    def make(kind: str = "v4") -> str:
        n = next(_addresses)
        ip = f"198.51.{n // 250}.{n % 250 + 1}" if kind == "v4" else f"2001:db8:{n:x}::1"
        cache.delete_many([_counter_key(ip), f"{_counter_key(ip)}:until"])
        return ip

    return make


@pytest.fixture
def limits(settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = LIMIT
    settings.API_KEY_FAILURE_RATE = f"{LIMIT}/min"


def log_in(path: str, username: str, password: str, ip: str) -> Any:
    return Client().post(path, {"username": username, "password": password}, REMOTE_ADDR=ip)


# --- Log-in pages -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_log_in_locks_after_failures_even_for_the_right_password(path, limits, tenant_a, address):
    admin = make_admin(tenant_a, username="boss", is_staff=True)
    ip = address()
    for _ in range(LIMIT - 1):
        assert log_in(path, "boss", "wrong", ip).status_code == 200  # the form again
    locked = log_in(path, "boss", "wrong", ip)
    assert locked.status_code == 429
    assert b"Too many log-in attempts" in locked.content
    assert locked["Retry-After"] == "900"
    refused = log_in(path, "boss", "pw", ip)  # the right password, during the lockout
    assert refused.status_code == 429
    assert "_auth_user_id" not in refused.wsgi_request.session
    # Another address (another user of the account) still gets in.
    assert log_in(path, "boss", "pw", address()).status_code == 302
    assert AccessAttempt.objects.filter(username=admin.username, ip_address=ip).exists()


@pytest.mark.django_db
def test_lockout_ends_after_the_cool_off_and_can_be_reset(limits, tenant_a, member_a, address):
    ip = address()
    for _ in range(LIMIT):
        log_in("/accounts/login/", member_a.username, "wrong", ip)
    assert log_in("/accounts/login/", member_a.username, "pw", ip).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - dt.timedelta(minutes=16))
    assert log_in("/accounts/login/", member_a.username, "pw", ip).status_code == 302

    for _ in range(LIMIT):
        log_in("/accounts/login/", member_a.username, "wrong", ip)
    assert log_in("/accounts/login/", member_a.username, "pw", ip).status_code == 429
    call_command("axes_reset")  # what an operator runs to lift every lock at once
    assert log_in("/accounts/login/", member_a.username, "pw", ip).status_code == 302


@pytest.mark.django_db
def test_a_successful_log_in_clears_the_failures(limits, tenant_a, member_a, address):
    ip = address()
    for _ in range(LIMIT - 1):
        log_in("/accounts/login/", member_a.username, "wrong", ip)
    assert log_in("/accounts/login/", member_a.username, "pw", ip).status_code == 302
    for _ in range(LIMIT - 1):
        assert log_in("/accounts/login/", member_a.username, "wrong", ip).status_code == 200


# --- API keys -----------------------------------------------------------------------------------


def key_get(raw_key: str, ip: str) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client.get(API_ME, REMOTE_ADDR=ip)


@pytest.mark.django_db
def test_failed_key_look_ups_are_throttled_per_address(limits, tenant_a, member_a, address):
    _, raw = api_key_create(tenant=tenant_a, name="k", user=member_a)
    ip, other = address(), address()
    for n in range(LIMIT):
        assert key_get(f"cpk_guess{n}", ip).status_code == 401
    throttled = key_get("cpk_guess-more", ip)
    assert throttled.status_code == 429
    assert throttled.json()["error"]["code"] == "throttled"
    assert "failed API-key attempts" in throttled.json()["error"]["message"]
    assert 1 <= int(throttled["Retry-After"]) <= 60
    # A valid key from the throttled address is refused as well: answering it would tell a
    # guesser which guess was right, at full speed.
    assert key_get(raw, ip).status_code == 429
    # Other addresses are not affected.
    assert key_get(raw, other).status_code == 200
    assert key_get("cpk_wrong", other).status_code == 401


@pytest.mark.django_db
def test_successful_look_ups_do_not_count(limits, tenant_a, member_a, address):
    _, raw = api_key_create(tenant=tenant_a, name="k", user=member_a)
    ip = address()
    for _ in range(LIMIT * 3):
        assert key_get(raw, ip).status_code == 200
    assert key_get("cpk_wrong", ip).status_code == 401


@pytest.mark.django_db
def test_the_throttle_ends_with_its_period(limits, tenant_a, member_a, address):
    _, raw = api_key_create(tenant=tenant_a, name="k", user=member_a)
    ip = address()
    for n in range(LIMIT):
        key_get(f"cpk_guess{n}", ip)
    assert key_get(raw, ip).status_code == 429
    cache.delete(_counter_key(ip))  # the counter's expiry
    assert key_get(raw, ip).status_code == 200


@pytest.mark.django_db
def test_ipv6_addresses_count_by_64_block(limits, tenant_a, member_a, address):
    base = address("v6")  # 2001:db8:N::1
    for n in range(LIMIT):
        key_get("cpk_guess", base.replace("::1", f"::{n + 2:x}"))
    assert key_get("cpk_guess", base).status_code == 429


def test_failure_rate_setting(settings):
    settings.API_KEY_FAILURE_RATE = "20/min"
    assert failure_rate() == (20, 60)
    settings.API_KEY_FAILURE_RATE = "5/hour"
    assert failure_rate() == (5, 3600)


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_websocket_handshake_refused_from_a_throttled_address(
    limits, tenant_a, member_a, address
):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="ws"
    )
    _, raw = await database_sync_to_async(api_key_create)(tenant=tenant_a, name="k", user=member_a)
    ip, other = address(), address()

    async def connect(key: str, client_ip: str) -> bool:
        ws = WebsocketCommunicator(
            application,
            f"/ws/conversations/{conversation.pk}/",
            headers=[(b"origin", b"http://testserver")],
            subprotocols=["chatplatform.v1", f"apikey.{key}"],
        )
        ws.scope["client"] = (client_ip, 50000)
        connected, _ = await ws.connect(timeout=10)
        await ws.disconnect()
        return connected

    assert await connect(raw, ip)
    for n in range(LIMIT):
        assert not await connect(f"cpk_guess{n}", ip)
    assert not await connect(raw, ip)  # refused: the address used up its failures
    assert await connect(raw, other)


def test_client_address_is_none_without_a_valid_one(rf):
    # A request without an address (force_login builds one) must not reach the database as a
    # bad IP value (PostgreSQL refuses it).
    assert client_ip(rf.get("/", REMOTE_ADDR="")) is None
    assert client_ip(rf.get("/", REMOTE_ADDR="unix:/run/app.sock")) is None
    assert client_ip(rf.get("/", REMOTE_ADDR="2001:DB8::1")) == "2001:db8::1"
    assert scope_client_ip({"client": None}) is None
    assert scope_client_ip({"client": ("192.0.2.1", 4)}) == "192.0.2.1"
