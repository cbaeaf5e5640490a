"""A beat scheduler that only ticks while it holds the beat lock.

Run beat with ``--scheduler summaries.beat:LockedDatabaseScheduler`` (or set
``CELERY_BEAT_SCHEDULER`` to it). It is django-celery-beat's ``DatabaseScheduler`` (schedules
in the database, editable in the admin) plus a leader lock in the shared cache (Redis): a
second beat started by mistake waits, sending nothing, until the first one stops renewing
the lock (it died), and then takes over. The lock expires ``LOCK_TTL`` seconds after its
last renewal; the holder renews it on every tick (at least every ``max_interval`` seconds).

This is the first line of defence; the periodic tasks also claim a dedupe window per run
(``chatplatform.locks.claim_run``) and are idempotent, so even two beats cannot double the work.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.core.cache import cache
from django_celery_beat.schedulers import DatabaseScheduler

from chatplatform.locks import lock_key

logger = logging.getLogger(__name__)

LOCK_NAME = "beat:leader"
LOCK_TTL = 60


class LockedDatabaseScheduler(DatabaseScheduler):
    lock_ttl = LOCK_TTL

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lock_token = uuid.uuid4().hex
        self.is_leader = False
        super().__init__(*args, **kwargs)
        # Renew well within the TTL even when nothing is due for a long time.
        current = float(getattr(self, "max_interval", self.lock_ttl / 3))
        self.max_interval = min(current, self.lock_ttl / 3)

    def hold_lock(self) -> bool:
        """Acquire or renew the leader lock; False while another beat holds it."""
        key = lock_key(LOCK_NAME)
        try:
            if cache.add(key, self.lock_token, self.lock_ttl):
                held = True
            elif cache.get(key) == self.lock_token:
                held = bool(cache.touch(key, self.lock_ttl)) or bool(
                    cache.add(key, self.lock_token, self.lock_ttl)
                )
            else:
                held = False
        except Exception:  # the cache is down: do not risk running twice
            logger.exception("beat: cannot reach the lock store; not ticking")
            held = False
        if held != self.is_leader:
            logger.info("beat: %s the leader lock", "acquired" if held else "lost")
        self.is_leader = held
        return held

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if not self.hold_lock():
            return float(self.max_interval)
        return float(super().tick(*args, **kwargs))

    def close(self) -> None:
        try:
            key = lock_key(LOCK_NAME)
            if self.is_leader and cache.get(key) == self.lock_token:
                cache.delete(key)
        except Exception:  # pragma: no cover - best effort on shutdown
            logger.exception("beat: could not release the leader lock")
        super().close()
