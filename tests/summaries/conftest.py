from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.core.cache import cache

from config.celery import app as celery_app
from tests.fakes.fixtures import fake_anthropic, fake_anthropic_server

__all__ = ["fake_anthropic", "fake_anthropic_server"]


@pytest.fixture(autouse=True)
def isolated_locks(settings) -> None:
    """Each test gets its own lock namespace (the cache may be a shared Redis)."""
    settings.SUMMARIES_LOCK_PREFIX = f"test-locks:{uuid.uuid4().hex}"


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """Tasks (and the ones they enqueue) run in-process, errors propagate."""
    old = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = old


@pytest.fixture
def clear_cache() -> Iterator[None]:
    yield
    if cache.__class__.__name__ == "LocMemCache":
        cache.clear()
