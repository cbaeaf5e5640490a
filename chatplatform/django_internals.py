"""The one adapter over Django's private API: the few internals the project relies on, each
behind a function here, so nothing else touches them. ``tests/platform/test_django_internals.py``
fails when the installed Django changes one of them.

- A connection's ``health_check_done`` flag: set, the next use skips the health-check query
  (the reply pipeline's database threads replace a dead connection themselves).
- A model instance's ``_state`` (``adding``, ``db``): what ``save()`` leaves on an instance it
  inserted, for rows inserted without the ORM's query building.
- A manager's database (``_db``): the alias a queryset it builds must use.
- A model form's ``_post_clean``: where Django builds the instance from the cleaned fields
  and validates it (:class:`InstanceValidationHook`).
- An admin site's registry (``_registry``): every registered model with its admin.
- A management command's output wrapper's stream (``_out``): for a progress bar, which
  writes without the wrapper's line endings.
- A Redis cache's client arguments (``_servers``, ``_options``, ``_class``): what its client
  is made of, so one process can share one client (:mod:`chatplatform.redis_cache`); and
  that client's connection pool for a read or a write (``_get_connection_pool``), so that it
  keeps one redis-py client per pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO, cast

from django.contrib.admin import AdminSite, ModelAdmin
from django.core.management.base import OutputWrapper
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Manager, Model


def connection_health_checked(connection: BaseDatabaseWrapper) -> None:
    """Let ``connection``'s next use skip its health-check query (``CONN_HEALTH_CHECKS``)."""
    connection.health_check_done = True  # type: ignore[attr-defined]


def instance_mark_saved(instance: Model, alias: str) -> None:
    """What ``save()`` leaves on an instance it inserted into database ``alias``: no longer
    being added (validation and the next ``save()`` treat it as stored), bound to ``alias``."""
    instance._state.adding = False
    instance._state.db = alias


def manager_database(manager: Manager[Any]) -> str | None:
    """The database alias ``manager`` was bound to (``db_manager``), None for the router's."""
    return manager._db


class InstanceValidationHook:
    """Mixed into a model form (first among its bases): :meth:`instance_validate` wraps the
    step where Django builds the instance from the cleaned fields and validates it (the
    model's ``clean()`` and uniqueness), which runs after every field's own cleaning."""

    def _post_clean(self) -> None:
        self.instance_validate(super()._post_clean)  # type: ignore[misc]

    def instance_validate(self, validate: Callable[[], None]) -> None:
        """Override to act around ``validate`` (which must be called once)."""
        validate()


def admin_registrations(site: AdminSite) -> list[tuple[type[Model], ModelAdmin[Any]]]:
    """Every model registered with ``site``, with its admin, in registration order."""
    return list(site._registry.items())


def output_stream(wrapper: OutputWrapper) -> TextIO:
    """The stream a management command's ``stdout``/``stderr`` wrapper writes to."""
    return cast(TextIO, wrapper._out)


def redis_cache_client_args(cache: Any) -> tuple[Any, dict[str, Any], Callable[..., Any]]:
    """The servers, options and client class a Django ``RedisCache`` builds its client from
    (``client_class(servers, **options)``)."""
    return cache._servers, cache._options, cache._class


def redis_cache_client_pool(client: Any, *, write: bool) -> Any:
    """The connection pool a Django ``RedisCacheClient`` uses for a write or a read."""
    return client._get_connection_pool(write)
