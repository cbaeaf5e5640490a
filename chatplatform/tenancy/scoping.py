"""Tenant scoping that fails closed.

Every tenant-owned model uses :class:`TenantScopedManager` as its default manager: a query
that runs outside an active tenant scope raises ``ScopeError`` instead of returning every
tenant's rows. Code enters a scope with :func:`tenant_scope` (one tenant, or several for a tenant
admin), or states plainly that it works across tenants with :func:`all_tenants`.

The scope state is django-scopes' (a ContextVar, so it follows async tasks too), read through
:mod:`chatplatform.tenancy.scopes_adapter`; the manager is ours because shared rows (presets
with no tenant) must stay visible inside every scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import models
from django_scopes import scope, scopes_disabled
from django_scopes.exceptions import ScopeError

from chatplatform.django_internals import manager_database
from chatplatform.tenancy.scopes_adapter import active_scope, refuse_if_refusing, refusing_queryset

__all__ = [
    "ScopeError",
    "TenantOwnedModel",
    "TenantScopedManager",
    "active_tenant_ids",
    "all_tenants",
    "tenant_scope",
]


class TenantScopedManager(models.Manager):
    """Filters on the active tenant scope; without one, every query raises ScopeError.

    ``include_shared`` also returns rows whose tenant is NULL (platform presets).
    """

    def __init__(self, include_shared: bool = False) -> None:
        super().__init__()
        self.include_shared = include_shared

    def get_queryset(self) -> models.QuerySet:
        state = active_scope()
        if state is None:
            return super().get_queryset()
        if "tenant" not in state:
            return refusing_queryset(self.model, manager_database(self), "tenant")
        ids = state["tenant"]
        condition = (
            models.Q(tenant_id__in=ids) if isinstance(ids, list) else models.Q(tenant_id=ids)
        )
        if self.include_shared:
            condition |= models.Q(tenant_id__isnull=True)
        return super().get_queryset().filter(condition)

    def all(self) -> models.QuerySet:
        queryset = super().all()
        refuse_if_refusing(queryset)
        return queryset


def _tenant_id(tenant: Any) -> int:
    if tenant is None:
        raise ScopeError("tenant_scope() needs a tenant; None would disable the filter")
    tenant_id = getattr(tenant, "pk", tenant)
    if not isinstance(tenant_id, int) or isinstance(tenant_id, bool):
        raise ScopeError(f"not a tenant or tenant id: {tenant!r}")
    return tenant_id


@contextmanager
def tenant_scope(tenant: Any | Iterable[Any]) -> Iterator[None]:
    """Run the block with queries restricted to ``tenant`` (a Tenant, an id, or several).

    An empty collection scopes to no tenant at all (every query returns nothing).
    """
    ids: int | list[int]
    if isinstance(tenant, (list, tuple, set, frozenset)):
        ids = [_tenant_id(t) for t in tenant] or [-1]
    else:
        ids = _tenant_id(tenant)
    with scope(tenant=ids):
        yield


def active_tenant_ids() -> list[int] | None:
    """The tenant ids of the active scope; None when scoping is disabled or absent."""
    state = active_scope()
    if state is None or "tenant" not in state:
        return None
    ids = state["tenant"]
    return list(ids) if isinstance(ids, list) else [ids]


@contextmanager
def all_tenants() -> Iterator[None]:
    """Disable tenant filtering: superusers, migrations and cross-tenant maintenance only."""
    with scopes_disabled():
        yield


class TenantOwnedModel(models.Model):
    """Base of every tenant-owned table: carries ``tenant_id`` and the fail-closed manager.

    Subclasses lead their hot indexes with ``tenant`` and put ``tenant`` in every unique
    constraint, so the schema can be distributed by tenant (Citus).
    """

    tenant = models.ForeignKey(
        "chatplatform.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False
    )

    objects = TenantScopedManager()

    class Meta:
        abstract = True
