"""Bursts over the rate limits from concurrent requests: exactly N get through, the rest are
refused. The counters are atomic (an INCR, not a read followed by a write), so concurrency
cannot squeeze extra requests past them.

- the API's per-key and per-user request throttles (``chats.api.throttling``), from threads;
- the policy's messages per minute per user (``coordination().hit``), from threads against the
  API and from concurrent sockets against the WebSocket consumer.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from rest_framework.test import APIClient

from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Message
from chatplatform.policies import policy_for
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.api.principal import ApiPrincipal
from chats.api.throttling import KeyRateThrottle, UserRateThrottle
from chats.services import conversation_create
from tests.security.test_abuse import open_socket

BURST = 24


def rates(settings: Any, **values: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_key": "10000/min", "api_user": "10000/min", **values},
    }


def burst(call: Callable[[int], Any], n: int = BURST) -> list[Any]:
    """``call(i)`` from ``n`` threads released together."""
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait()
        try:
            return call(i)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


@pytest.mark.django_db
@pytest.mark.parametrize("throttle_class", [KeyRateThrottle, UserRateThrottle])
def test_throttle_counts_atomically(settings, tenant_a, member_a, throttle_class):
    """The throttle itself under a burst (the configured cache: Redis or local memory)."""
    rates(settings, api_key="5/min", api_user="5/min")
    key, _ = api_key_create(tenant=tenant_a, name="k", user=member_a)

    class Request:
        auth = ApiPrincipal(tenant=tenant_a, user=member_a, is_admin=False, key=key)

    from django.core.cache import cache

    stale = throttle_class().get_cache_key(Request(), None)  # type: ignore[arg-type]
    cache.delete_many([stale, f"{stale}:start"])  # ids repeat across SQLite test databases

    def attempt(i: int) -> bool:
        return throttle_class().allow_request(Request(), None)  # type: ignore[arg-type]

    results = burst(attempt)
    assert results.count(True) == 5, Counter(results)
    throttle = throttle_class()
    assert not throttle.allow_request(Request(), None)  # type: ignore[arg-type]
    assert 0 < throttle.wait() <= 60


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_api_key_and_user_limits_hold_under_concurrent_requests(settings, presets):
    """Threads against the API (PostgreSQL: every thread its own connection)."""
    if connection.vendor != "postgresql":
        pytest.skip("concurrent requests need PostgreSQL")
    from tests.factories import make_member, make_tenant

    tenant = make_tenant("Burst")
    user = make_member(tenant, username="burster")
    _, key_one = api_key_create(tenant=tenant, name="one", user=user)
    other = make_member(tenant, username="burster-two")
    _, key_two = api_key_create(tenant=tenant, name="two", user=other)
    _, key_three = api_key_create(tenant=tenant, name="three", user=other)

    def get(raw: str) -> int:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client.get("/api/v1/me/").status_code

    # One key: the per-key limit.
    rates(settings, api_key="7/min")
    statuses = Counter(burst(lambda i: get(key_one)))
    assert statuses == Counter({200: 7, 429: BURST - 7}), statuses

    # Another user's two keys at once: the per-user limit spans the user's keys.
    rates(settings, api_key="10000/min", api_user="9/min")
    statuses = Counter(burst(lambda i: get(key_two if i % 2 else key_three)))
    assert statuses == Counter({200: 9, 429: BURST - 9}), statuses


def slow_policy(tenant: Any, per_minute: int) -> None:
    with tenant_scope(tenant):
        policy = ContextPolicy.objects.get(pk=tenant.active_policy_id)
        policy.pk = None
        policy.tenant = tenant
        policy.name = "Slow"
        policy.user_messages_per_minute = per_minute
        policy.save()
    tenant.active_policy = policy
    tenant.save(update_fields=["active_policy"])
    from chatplatform.policies import clear_policy_cache

    clear_policy_cache()


def complete_replies(conversation: Any) -> int:
    with tenant_scope(conversation.tenant_id):
        return Message.objects.filter(
            conversation=conversation, role="assistant", status="complete"
        ).count()


def user_messages(conversation: Any) -> int:
    with tenant_scope(conversation.tenant_id):
        return Message.objects.filter(conversation=conversation, role="user").count()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_message_rate_holds_under_concurrent_api_posts(settings, presets):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent requests need PostgreSQL")
    from tests.factories import make_member, make_tenant

    settings.API_REPLY_WAIT_SECONDS = 0.2  # the answer need not wait for the reply
    tenant = make_tenant("Chatty")
    user = make_member(tenant, username="chatty")
    slow_policy(tenant, 4)
    conversation = conversation_create(tenant=tenant, created_by=user, title="burst")
    _, raw = api_key_create(tenant=tenant, name="k", user=user)
    url = f"/api/v1/conversations/{conversation.pk}/messages/"

    def post(i: int) -> int:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client.post(url, {"content": f"m{i}"}, format="json").status_code

    statuses = Counter(burst(post, 16))
    accepted = statuses[201] + statuses[202]
    assert accepted == 4 and statuses[429] == 12, statuses
    assert user_messages(conversation) == 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_message_rate_holds_under_concurrent_sockets(tenant_a, member_a):
    """Five sockets of one user send three messages each at once: exactly the policy's limit
    are accepted (acked and stored); the others get ``rate_limited``. (SQLite's in-memory test
    database fails concurrent writers at once, so there the limit is one: a single writer.)"""
    limit = 4 if connection.vendor == "postgresql" else 1
    await database_sync_to_async(slow_policy)(tenant_a, limit)
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="ws burst"
    )
    await database_sync_to_async(policy_for)(conversation)  # cached: no reads in the burst
    sockets = [(await open_socket(conversation, member_a))[0] for _ in range(5)]

    async def send(ws: Any, n: int) -> None:
        await ws.send_json_to({"type": "message", "content": f"m{n}", "client_id": f"c{n}"})

    await asyncio.gather(*(send(ws, i * 10 + j) for i, ws in enumerate(sockets) for j in range(3)))
    outcomes: Counter[str] = Counter()
    for ws in sockets:
        # Each socket answers its own frames with ack or error; the rest is broadcast.
        answered = 0
        while answered < 3:
            event = await ws.receive_json_from(timeout=15)
            if event["type"] == "ack":
                outcomes["accepted"] += 1
                answered += 1
            elif event["type"] == "error" and event.get("client_id") is not None:
                assert event["code"] == "rate_limited", event
                assert f"{limit} per minute" in event["message"]
                outcomes["rate_limited"] += 1
                answered += 1
    assert outcomes == Counter({"accepted": limit, "rate_limited": 15 - limit}), outcomes
    from chats.replies import runner

    while runner._background:
        await asyncio.sleep(0.05)
    for ws in sockets:
        await ws.disconnect()
    assert await database_sync_to_async(user_messages)(conversation) == limit
    # Every accepted message was answered, and the runner lock that rate-limited frames took
    # in the same round trip as their count was let go.
    assert await database_sync_to_async(complete_replies)(conversation) == limit
    from chats.replies.coordination import coordination, runner_lock_name

    lock = runner_lock_name(conversation.tenant_id, conversation.pk)
    token = await coordination().acquire(lock)
    assert token is not None
    await coordination().release(lock, token)
