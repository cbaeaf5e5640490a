"""Locks in the shared cache (Redis in production): who may do a piece of work right now.

- :func:`exclusive` is a mutual-exclusion lock with an expiry (released at the end; the
  expiry frees it if the holder dies), e.g. one rolling-summary run per conversation.
- :func:`claim_run` marks a periodic task's run for a dedupe window and is *not* released:
  a second beat started by mistake fires the same schedule at about the same time, and its
  duplicate finds the claim and does nothing.
- :func:`cooldown` / :func:`in_cooldown`: after a permanent failure (the model produced no
  valid summary twice) the same work is not retried on every turn.

With the local-memory cache (the embedded default: one worker process) the locks are
per process, which is all that setup needs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from celery import current_task
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone


def lock_key(name: str) -> str:
    prefix = getattr(settings, "SUMMARIES_LOCK_PREFIX", "summaries:lock")
    return f"{prefix}:{name}"


def _current_task_id() -> str | None:
    request = getattr(current_task, "request", None) if current_task else None
    task_id = getattr(request, "id", None)
    return task_id if isinstance(task_id, str) else None


@contextmanager
def exclusive(name: str, timeout: int) -> Iterator[bool]:
    """Yield True if the lock ``name`` was acquired (held for at most ``timeout`` seconds).

    Inside a Celery task the lock remembers the task's id: a redelivery of the same task
    (its worker was killed with the lock held) takes the lock over instead of finding it
    taken until it expires. The broker delivers a task to one worker at a time, so the
    takeover cannot run beside its earlier delivery."""
    key, owner = lock_key(name), _current_task_id()
    token = f"{owner}:{uuid.uuid4().hex}" if owner else uuid.uuid4().hex
    acquired = bool(cache.add(key, token, timeout))
    if not acquired and owner:
        held = cache.get(key)
        if isinstance(held, str) and held.startswith(f"{owner}:"):
            cache.set(key, token, timeout)
            acquired = True
    try:
        yield acquired
    finally:
        if acquired and cache.get(key) == token:
            cache.delete(key)


def claim_run(task_name: str, window_seconds: int, scope: str = "") -> bool:
    """True for the first claim of ``task_name`` (and ``scope``) within ``window_seconds``."""
    key = lock_key(f"run:{task_name}:{scope}")
    return bool(cache.add(key, timezone.now().isoformat(), window_seconds))


def cooldown(name: str, seconds: int) -> None:
    cache.set(lock_key(f"cooldown:{name}"), 1, seconds)


def in_cooldown(name: str) -> bool:
    return cache.get(lock_key(f"cooldown:{name}")) is not None
