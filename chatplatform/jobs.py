"""What every background job shares: the errors worth a retry, the retry and acknowledgement
options, and the queue of a follow-up run. The time limits and backoff come from settings,
where they are derived from each other (``docs/jobs.md``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: Database connection or lock failures, the broker or the cache being unreachable.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    BrokerError,
    RedisConnectionError,
    RedisTimeoutError,
)
MAX_RETRIES = 8  # with backoff 10, 20, 40 and then the cap: about six minutes of outage


def task_options(*transient: type[BaseException]) -> dict[str, Any]:
    """Options of an idempotent job: retried with capped exponential backoff on the transient
    errors (and ``transient``, the job's own), acknowledged late, no stored result."""
    return {
        "autoretry_for": TRANSIENT_ERRORS + transient,
        "retry_backoff": 10,
        "retry_backoff_max": settings.JOB_RETRY_BACKOFF_MAX,
        "retry_jitter": True,
        "max_retries": MAX_RETRIES,
        "acks_late": True,
        "ignore_result": True,
    }


def same_queue(task: Any) -> dict[str, Any]:
    """Options that send a follow-up run to the queue the current run came from."""
    info = getattr(task.request, "delivery_info", None) or {}
    queue = info.get("routing_key")
    return {"queue": queue} if queue else {}
