from __future__ import annotations

import os

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections
from hypothesis import settings as hypothesis_settings

from tests.factories import make_admin, make_conversation, make_member, make_tenant
from tests.fakes.fixtures import (  # noqa: F401  (fixtures for every test)
    fake_anthropic,
    fake_anthropic_server,
    fake_openai,
    fake_openai_server,
    fake_openid_provider,
    fake_openid_provider_server,
)
from tests.tokens.fixtures import dev_rows, estimator, reference  # noqa: F401  (token tests)

# CI runs the property tests with a fixed seed, so a run is reproducible; locally they explore.
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


#: Modules whose tests start processes of their own (a Celery worker, an ASGI server, a nested
#: pytest) and wait for them with timeouts. Under ``make test``'s two xdist workers they all
#: run on the same worker (``--dist loadgroup``), so two of them never compete for the cores.
PROCESS_TESTS = (
    "tests/jobs/test_worker.py",
    "tests/api/test_live_sse.py",
    "tests/security/test_stream_credentials.py",
    "tests/replies/test_live_server.py",
    "tests/deploy/test_production_start.py",
    "tests/deploy/test_production_walkthrough.py",
    "tests/deploy/test_bench_chat_start.py",
    "tests/tooling/test_bench_compat.py",
    "tests/deploy/test_fresh_clone.py",
    "tests/security/test_body_limits.py",
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups from the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups the process tests on one xdist worker. Tests marked ``postgres`` need
    PostgreSQL: on any other database (the embedded SQLite of a fresh clone, where
    ``make test`` runs with nothing configured) they are skipped with the reason instead of
    failing."""
    from django.conf import settings

    for item in items:
        if item.nodeid.split("::", 1)[0] in PROCESS_TESTS:
            item.add_marker(pytest.mark.xdist_group("processes"))

    engine = settings.DATABASES["default"]["ENGINE"]
    if engine == "django.db.backends.postgresql":
        return
    skip = pytest.mark.skip(
        reason=f"needs PostgreSQL (DATABASE_URL=postgres://...); the test database is "
        f"{engine.rsplit('.', 1)[-1]}"
    )
    for item in items:
        if item.get_closest_marker("postgres"):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _fresh_redis_keys():
    """Test databases restart their ids every run, but Redis keeps delta logs and locks (with
    TTLs) between runs: remove the platform's keys so a reused id never meets stale state."""
    from django.conf import settings

    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
        for key in client.scan_iter("chatplatform:*"):
            client.delete(key)
        client.close()
    yield


@pytest.fixture(autouse=True)
def _fresh_coordination():
    """Every test starts with fresh reply coordination and the default model providers."""
    from chats.replies import runner
    from chats.replies.coordination import coordination_reset

    coordination_reset()
    runner.provider_factory_set(None)
    yield
    runner.provider_factory_set(None)
    coordination_reset()


@pytest.fixture(scope="session", autouse=True)
def _stop_api_loop(django_db_setup, django_db_blocker):
    """Stop the API's background event loop before the test database is dropped (its worker
    threads hold connections to it)."""
    yield
    import gc

    from chats.api.bridge import stop_background_loop
    from chats.replies.db import pool_connections_close

    with django_db_blocker.unblock():
        stop_background_loop()
        pool_connections_close()  # the reply pipeline's threads hold connections too
        # Async tests' ``database_sync_to_async`` calls run on asgiref's one shared thread,
        # which keeps its persistent connection too.
        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)
    gc.collect()


@pytest.fixture(autouse=True)
def _fresh_policy_cache():
    from chatplatform.policies import clear_policy_cache

    clear_policy_cache()
    yield
    clear_policy_cache()


def ensure_presets() -> None:
    """Transactional tests flush every table, the data migration's presets included: put the
    presets and model profiles back (idempotent)."""
    import importlib

    from django.apps import apps

    from chatplatform.models import ModelProfile

    if ModelProfile._base_manager.filter(tenant__isnull=True).exists():
        return
    presets = importlib.import_module("chatplatform.migrations.0002_presets")
    presets.forwards(apps, None)


@pytest.fixture
def presets(db):
    ensure_presets()


@pytest.fixture
def tenant_a(presets):
    return make_tenant("Tenant A")


@pytest.fixture
def tenant_b(presets):
    return make_tenant("Tenant B")


@pytest.fixture
def admin_a(tenant_a):
    return make_admin(tenant_a, username="admin-a")


@pytest.fixture
def admin_b(tenant_b):
    return make_admin(tenant_b, username="admin-b")


@pytest.fixture
def member_a(tenant_a):
    return make_member(tenant_a, username="member-a")


@pytest.fixture
def member_b(tenant_b):
    return make_member(tenant_b, username="member-b")


@pytest.fixture
def conversation_a(tenant_a, member_a):
    return make_conversation(tenant_a, member_a, title="Trip planning")


@pytest.fixture
def conversation_b(tenant_b, member_b):
    return make_conversation(tenant_b, member_b, title="Beta plans")


@pytest.fixture
def conversation(conversation_a):
    """Tenant A's conversation, for tests that involve one tenant only."""
    return conversation_a
