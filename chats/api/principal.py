"""Who an API request acts as, and the tenant scope it runs in."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from chatplatform.models import ApiKey, Tenant
from chatplatform.tenancy.scoping import tenant_scope

_SCOPE_ATTRIBUTE = "_api_tenant_scope"


@dataclass(frozen=True)
class ApiPrincipal:
    """The authenticated caller: ``user`` within ``tenant``. ``key`` is the API key used (None
    for a browser session). ``is_admin``: an admin key, or a session of a tenant admin; it may
    manage every user's facts within the tenant and sees the whole tenant's usage."""

    tenant: Tenant
    user: Any
    is_admin: bool
    key: ApiKey | None = None

    @property
    def tenant_id(self) -> int:
        return int(self.tenant.pk)


def enter_request_scope(request: HttpRequest, tenant: Tenant) -> None:
    """Enter ``tenant``'s scope for the rest of this request (left by
    :func:`leave_request_scope`, which the API's base view calls when the request ends)."""
    stack = getattr(request, _SCOPE_ATTRIBUTE, None)
    if stack is None:
        stack = ExitStack()
        setattr(request, _SCOPE_ATTRIBUTE, stack)
    stack.enter_context(tenant_scope(tenant))


def leave_request_scope(request: HttpRequest) -> None:
    """Leave every scope :func:`enter_request_scope` entered for ``request`` (idempotent)."""
    stack = getattr(request, _SCOPE_ATTRIBUTE, None)
    if stack is not None:
        delattr(request, _SCOPE_ATTRIBUTE)
        stack.close()
