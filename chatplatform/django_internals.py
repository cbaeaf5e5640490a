"""The one adapter over Django's private API: the few internals the project relies on, each
behind a function here, so nothing else touches them. ``tests/platform/test_django_internals.py``
fails when the installed Django changes one of them.

- A connection's ``health_check_done`` flag: set, the next use skips the health-check query
  (the reply pipeline's database threads replace a dead connection themselves).
- A model instance's ``_state`` (``adding``, ``db``): what ``save()`` leaves on an instance it
  inserted, for rows inserted without the ORM's query building.
- A manager's database (``_db``): the alias a queryset it builds must use.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Manager, Model


def connection_health_checked(connection: BaseDatabaseWrapper) -> None:
    """Let ``connection``'s next use skip its health-check query (``CONN_HEALTH_CHECKS``)."""
    connection.health_check_done = True


def instance_mark_saved(instance: Model, alias: str) -> None:
    """What ``save()`` leaves on an instance it inserted into database ``alias``: no longer
    being added (validation and the next ``save()`` treat it as stored), bound to ``alias``."""
    instance._state.adding = False
    instance._state.db = alias


def manager_database(manager: Manager[Any]) -> str | None:
    """The database alias ``manager`` was bound to (``db_manager``), None for the router's."""
    return manager._db
