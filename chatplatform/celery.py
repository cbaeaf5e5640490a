"""The Celery application. Configuration comes from Django settings (``CELERY_*``).

``CELERY_VISIBILITY_TIMEOUT`` (seconds; environment) overrides the Redis broker's visibility
timeout: how long a delivered but unacknowledged task (its worker was killed with ``kill -9``,
or lost its machine) waits before Redis hands it to another worker. Tasks are acknowledged
late, so such a task runs again; the timeout must stay above the longest task run plus its
retry backoff, hence the long default in settings. Tests that kill workers shorten it.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatplatform.settings")

app = Celery("chatplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _require_secret_key(**_: object) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from chatplatform.startup import require_secret_key

    try:
        require_secret_key()
    except ImproperlyConfigured as exc:
        # Celery logs and swallows a receiver's exceptions; SystemExit stops the process.
        raise SystemExit(str(exc)) from exc


_visibility = os.environ.get("CELERY_VISIBILITY_TIMEOUT")
if _visibility:
    seconds = int(_visibility)
    app.conf.broker_transport_options = {
        **(app.conf.broker_transport_options or {}),
        "visibility_timeout": seconds,
        # Look for tasks to restore at least as often as they may become due.
        "unacked_restore_interval": max(1, min(10, seconds // 2)),
        "unacked_restore_throttle": 1,
    }
