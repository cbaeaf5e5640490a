"""The Celery application. Configuration comes from Django settings (``CELERY_*``): the
task time limits, the jobs' locks and the Redis broker's visibility timeout (how long a task
of a worker that was killed waits before Redis hands it to another worker) are derived from
each other there (``docs/jobs.md``). How a worker rides out a broker restart, and what brings a
worker back when it exits anyway: ``docs/supervision.md``.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, worker_init
from django.core.exceptions import ImproperlyConfigured

from config.startup import require_secret_key

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("chatplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    # A worker never gives up on the broker: after a Redis restart or outage of any length it
    # reconnects (every few seconds, backing off to 30 s) and goes on with the queue, instead
    # of exiting after 100 attempts with nothing to bring it back.
    broker_connection_retry=True,
    broker_connection_retry_on_startup=True,
    broker_connection_max_retries=None,
    # A task running when the connection drops is left to finish, not killed: its delivery
    # cannot be acknowledged on the new connection, so the broker hands it out again after the
    # visibility timeout, and the second run finds the work done (tasks are idempotent and
    # hold their job's lock). Killing it would throw away a reply or summary half made.
    worker_cancel_long_running_tasks_on_connection_loss=False,
)
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _require_secret_key(**_: object) -> None:
    try:
        require_secret_key()
    except ImproperlyConfigured as exc:
        # Celery logs and swallows a receiver's exceptions; SystemExit stops the process.
        raise SystemExit(str(exc)) from exc
