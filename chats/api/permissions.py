"""Permissions of the API."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from chats.api.principal import ApiPrincipal


class HasTenantPrincipal(BasePermission):
    """The request was authenticated by one of the API's classes (a key or a session with a
    tenant); anything else is 401."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, ApiPrincipal)
