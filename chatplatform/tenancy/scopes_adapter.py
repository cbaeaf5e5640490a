"""The one adapter over django-scopes' internals. Its public API (``scope``,
``scopes_disabled``, ``ScopeError``) is used as documented; the tenant manager also needs what
the library keeps to itself: the active scope's state (``django_scopes.state.get_scope``, with
the private ``_enabled`` key that ``scopes_disabled`` clears) and the queryset that refuses
every query (``django_scopes.manager.DisabledQuerySet`` and its ``error``). Nothing else in
the project touches them; ``tests/platform/test_scopes_adapter.py`` fails when the installed
django-scopes changes them.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django_scopes.manager import DisabledQuerySet
from django_scopes.state import get_scope


def active_scope() -> dict[str, Any] | None:
    """The active scope's dimensions (``{"tenant": ...}``, empty outside any scope); None while
    scoping is disabled (``scopes_disabled``)."""
    state = get_scope()
    if not state.get("_enabled", True):
        return None
    return state


def refusing_queryset(model: type[models.Model], using: str | None, missing: str) -> Any:
    """A queryset of ``model`` that raises ScopeError on every query: dimension ``missing``
    needs to be active."""
    return DisabledQuerySet(model, using=using, missing_scopes=[missing])


def refuse_if_refusing(queryset: models.QuerySet[Any]) -> None:
    """Raise ScopeError now when ``queryset`` is one of :func:`refusing_queryset`'s."""
    if isinstance(queryset, DisabledQuerySet):
        queryset.error()
