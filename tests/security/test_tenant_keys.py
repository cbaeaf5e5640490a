"""Everything shared between tenants carries the tenant: cache keys, coordination keys (delta
logs, locks, stop flags, rate counters), channel-layer group names, throttle keys and Celery
task arguments.

The audits record the keys the real code uses while it works (a spy that records and passes
every call through), so a new key, group or task without the tenant fails here."""

from __future__ import annotations

import base64
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from celery import current_app
from celery.signals import before_task_publish
from django.conf import settings
from django.core.cache import caches
from rest_framework.test import APIClient

from chats.api.principal import ApiPrincipal
from chats.api.throttling import KeyRateThrottle, UserRateThrottle
from chats.replies import coordination as coordination_module
from chats.replies.coordination import coordination
from chats.replies.events import conversation_group

#: Keys that belong to no tenant on purpose: (pattern, why).
GLOBAL_KEYS = [
    (r"summaries:lock:beat", "the single beat scheduler's leader lock"),
    (r"summaries:lock:run:", "a periodic sweep's dedupe claim (one per schedule, all tenants)"),
    (r"summaries:lock:backfill:all", "the backfill sweep over every tenant"),
    (r"apikey-failures:", "failed API-key look-ups per client address, before any tenant is known"),
]

#: Celery tasks that work across tenants by design: name -> why.
CROSS_TENANT_TASKS = {
    "chats.tasks.mark_stale_replies": "finishes replies whose process died, in every tenant",
    "chats.tasks.expire_conversations": "beat sweep; each tenant's retention in its own scope",
    "chats.tasks.remove_expired_exports": "beat sweep; each tenant's expired exports in its scope",
    "summaries.tasks.refresh_periodic_summaries": "beat sweep; dispatches per-tenant tasks",
    "summaries.tasks.backfill_token_counts": "beat sweep over every tenant, or one (tenant_id)",
    "chats.tasks.backfill_message_embeddings": "beat sweep; dispatches per-tenant tasks",
    "chatplatform.tasks.update_model_profiles_from_provider": (
        "writes only the shared (tenant-less) model profiles, with the operator's key"
    ),
}


def tenant_tag(tenant_id: int) -> re.Pattern[str]:
    return re.compile(rf"(^|[^a-z0-9])t{tenant_id}([^0-9]|$)")


def offenders(keys: set[str], tenant_id: int) -> list[str]:
    tag = tenant_tag(tenant_id)
    return sorted(
        k for k in keys if not tag.search(k) and not any(re.search(p, k) for p, _ in GLOBAL_KEYS)
    )


# --- builders -----------------------------------------------------------------------------


def test_group_names_carry_the_tenant():
    assert tenant_tag(7).search(conversation_group(7, 9))
    assert conversation_group(7, 9) != conversation_group(8, 9)


def test_coordination_keys_carry_the_tenant():
    assert tenant_tag(7).search(coordination_module._key("deltas", 7, 9))
    assert coordination_module._key("stop", 7, 9) != coordination_module._key("stop", 8, 9)


@pytest.mark.django_db
def test_throttle_keys_carry_the_tenant(tenant_a, member_a):
    from chatplatform.services import api_key_create

    key, _ = api_key_create(tenant=tenant_a, name="k", user=member_a)
    principal = ApiPrincipal(tenant=tenant_a, user=member_a, is_admin=False, key=key)

    class Request:
        auth = principal

    for throttle in (KeyRateThrottle(), UserRateThrottle()):
        cache_key = throttle.get_cache_key(Request(), None)  # type: ignore[arg-type]
        assert cache_key and tenant_tag(tenant_a.pk).search(cache_key), cache_key


# --- runtime audit: every key the real code touches -------------------------------------------

CACHE_METHODS = ("add", "set", "get", "delete", "incr", "touch", "get_or_set", "has_key")


@pytest.fixture
def recorded_keys(monkeypatch) -> Iterator[set[str]]:
    """Record every cache key and coordination key/lock name used (calls pass through)."""
    keys: set[str] = set()
    backend_class = type(caches["default"])
    for name in CACHE_METHODS:
        original = getattr(backend_class, name)

        def spy(self: Any, key: Any, *args: Any, __original: Any = original, **kw: Any) -> Any:
            keys.add(f"cache:{key}")
            return __original(self, key, *args, **kw)

        monkeypatch.setattr(backend_class, name, spy)
    original_key = coordination_module._key

    def key_spy(kind: str, tenant_id: int, object_id: int) -> str:
        built = original_key(kind, tenant_id, object_id)
        keys.add(f"coordination:{built}")
        return built

    monkeypatch.setattr(coordination_module, "_key", key_spy)
    hub_class = type(coordination())
    for name in ("acquire", "refresh", "release", "hit", "hit_and_acquire"):
        original = getattr(hub_class, name)

        async def hub_spy(self: Any, key: str, *args: Any, __original: Any = original) -> Any:
            keys.add(f"coordination:{key}")
            if __original.__name__ == "hit_and_acquire":  # and the lock it takes
                keys.add(f"coordination:{args[-1]}")
            return await __original(self, key, *args)

        monkeypatch.setattr(hub_class, name, hub_spy)
    yield keys


@pytest.mark.django_db(transaction=True)
def test_chat_pipeline_keys_and_groups_carry_the_tenant(tenant_a, member_a, recorded_keys):
    """A WebSocket turn (rate counter, runner lock, delta log, stop flag, group) and API
    requests (key and user throttles, message rate counter) in tenant A."""
    from chats.services import conversation_create
    from tests.security.test_abuse import ws_turn

    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="keys")
    groups = async_to_sync(ws_turn)(conversation, member_a)
    assert groups and all(tenant_tag(tenant_a.pk).search(g) for g in groups), groups

    from chatplatform.services import api_key_create

    _, raw = api_key_create(tenant=tenant_a, name="k", user=member_a)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/me/").status_code == 200
    url = f"/api/v1/conversations/{conversation.pk}/messages/"
    assert client.post(url, {"content": "hi"}, format="json").status_code in (201, 202)

    kinds = " ".join(recorded_keys)
    for expected in ("throttle_api_key", "throttle_api_user", "msg:", "replies:", "deltas"):
        assert expected in kinds, f"no {expected} key was used: {sorted(recorded_keys)}"
    assert offenders(recorded_keys, tenant_a.pk) == []


@pytest.mark.django_db
def test_summary_job_keys_carry_the_tenant(tenant_a, member_a, recorded_keys):
    from chats.services import conversation_create
    from summaries.services import summary_refresh
    from summaries.services.periodic import periodic_summary_refresh
    from tests.api.helpers import add_message

    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="sum")
    for n in range(3):
        add_message(conversation, member_a, f"message {n}")
    summary_refresh(tenant_a.pk, conversation.pk)
    periodic_summary_refresh(tenant_a.pk, conversation.pk)
    assert any("rolling" in k for k in recorded_keys), recorded_keys
    assert offenders(recorded_keys, tenant_a.pk) == []


# --- Celery tasks -------------------------------------------------------------------------------


def our_tasks() -> dict[str, Any]:
    current_app.loader.import_default_modules()
    apps = ("chats.", "chatplatform.", "memory.", "summaries.")
    return {name: task for name, task in current_app.tasks.items() if name.startswith(apps)}


def test_every_task_takes_the_tenant():
    tasks = our_tasks()
    assert "summaries.tasks.refresh_rolling_summary" in tasks
    missing = []
    for name, task in sorted(tasks.items()):
        parameters = inspect.signature(task.run).parameters
        if name in CROSS_TENANT_TASKS:
            continue
        tenant = parameters.get("tenant_id")
        if tenant is None or tenant.default is not inspect.Parameter.empty:
            missing.append(name)
    assert not missing, (
        f"Tasks without a required tenant_id argument: {missing}. Give them one, or add them "
        "to CROSS_TENANT_TASKS in tests/security/test_tenant_keys.py saying why they span "
        "tenants."
    )
    stale = set(CROSS_TENANT_TASKS) - set(tasks)
    assert not stale, f"CROSS_TENANT_TASKS names tasks that no longer exist: {stale}"


def _broker_messages(task_id: str) -> list[dict[str, Any]]:
    """The enqueued messages of ``task_id`` as the broker holds them (Redis list or the
    filesystem transport's files), removed from the broker."""
    found = []
    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
        for queue in client.scan_iter("celery*"):
            if client.type(queue) != "list":
                continue
            raws: list[str] = client.lrange(queue, 0, -1)  # type: ignore[assignment]
            for raw in raws:
                if task_id in raw:
                    found.append(json.loads(raw))
                    client.lrem(queue, 0, raw)
        client.close()
    else:
        folder = Path(str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_out"]))
        for path in folder.glob("*.msg"):
            try:
                raw_text = path.read_text()
            except FileNotFoundError:
                continue
            if task_id in raw_text:
                found.append(json.loads(raw_text))
                path.unlink(missing_ok=True)
    return found


@pytest.mark.django_db
def test_enqueued_task_messages_carry_the_tenant(
    tenant_a, member_a, django_capture_on_commit_callbacks
):
    """A summary refresh asked for through the API is really enqueued (eager mode off); the
    message on the broker names the tenant first."""
    from chatplatform.services import api_key_create
    from chats.services import conversation_create

    assert not current_app.conf.task_always_eager
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="queued")
    _, raw = api_key_create(tenant=tenant_a, name="k", user=member_a)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    published: list[tuple[str, Any, dict[str, Any]]] = []

    def record(sender: Any = None, body: Any = None, headers: Any = None, **kw: Any) -> None:
        published.append((sender, body, headers or {}))

    before_task_publish.connect(record)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            url = f"/api/v1/conversations/{conversation.pk}/summaries/refresh/"
            assert client.post(url).status_code in (200, 202)
    finally:
        before_task_publish.disconnect(record)
    assert published, "nothing was enqueued"
    for name, body, headers in published:
        args, kwargs, _embed = body
        assert (args and args[0] == tenant_a.pk) or kwargs.get("tenant_id") == tenant_a.pk
        messages = _broker_messages(headers["id"])
        assert len(messages) == 1, f"{name} is not on the broker"
        on_broker = messages[0]
        assert on_broker["headers"]["task"] == name
        payload = on_broker["body"]
        if on_broker.get("properties", {}).get("body_encoding") == "base64":
            payload = base64.b64decode(payload).decode()
        broker_args, _kwargs, _ = json.loads(payload)
        assert broker_args[0] == tenant_a.pk
