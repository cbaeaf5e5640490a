"""The Celery application. Configuration comes from Django settings (``CELERY_*``): the
task time limits, the jobs' locks and the Redis broker's visibility timeout (how long a task
of a worker that was killed waits before Redis hands it to another worker) are derived from
each other there (``docs/jobs.md``).
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, worker_init
from django.core.exceptions import ImproperlyConfigured

from chatplatform.config.startup import require_secret_key

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatplatform.config.settings")

app = Celery("chatplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _require_secret_key(**_: object) -> None:
    try:
        require_secret_key()
    except ImproperlyConfigured as exc:
        # Celery logs and swallows a receiver's exceptions; SystemExit stops the process.
        raise SystemExit(str(exc)) from exc
