"""Activates the tenant scope for every request.

- Anonymous users: scoped to no tenant (every tenant-owned query returns nothing).
- Superusers in the admin: no scope (they see everything).
- Staff users in the admin: the tenants they administer.
- Everyone else: their current tenant (chosen with the tenant switcher, stored in the session,
  always re-checked against their memberships).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from django.http import HttpRequest, HttpResponse

from chatplatform.selectors import administered_tenant_ids, current_membership
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

SESSION_TENANT_KEY = "tenant_id"


class TenantScopeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with self._scope_for(request):
            return self.get_response(request)

    def _scope_for(self, request: HttpRequest) -> AbstractContextManager[None]:
        user = request.user
        request.tenant = None  # type: ignore[attr-defined]
        request.membership = None  # type: ignore[attr-defined]
        if not user.is_authenticated:
            return tenant_scope([])
        if request.path.startswith("/admin/") and user.is_staff:
            if user.is_superuser:
                return all_tenants()
            return tenant_scope(administered_tenant_ids(user))
        membership = current_membership(user, request.session.get(SESSION_TENANT_KEY))
        if membership is None:
            return tenant_scope([])
        request.membership = membership  # type: ignore[attr-defined]
        request.tenant = membership.tenant  # type: ignore[attr-defined]
        return tenant_scope(membership.tenant_id)
