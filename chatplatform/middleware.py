"""The platform's middleware: the tenant scope of every request, and a streaming response's
database connections given back before it streams.

The tenant scope:

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

from chatplatform.db import thread_connections_release
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


class StreamingConnectionsReleaseMiddleware:
    """A streaming response (the APIs' server-sent events) gives the request thread's
    database connections back before it streams: Django gives them back only when the
    response ends, and a reply streams for seconds while needing connections of its own
    (:func:`chatplatform.db.thread_connections_release`). First in ``MIDDLEWARE``, so that
    it runs after every other middleware's response processing."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.streaming:
            thread_connections_release()
        return response
