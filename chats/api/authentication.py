"""Authentication of API requests: tenant API keys (``Authorization: Bearer <key>``) and the
browser session. Both set ``request.auth`` to an :class:`ApiPrincipal` and run the request in
that principal's tenant scope, so every query of the view is confined to the tenant."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    get_authorization_header,
)
from rest_framework.request import Request

from chatplatform.bruteforce import ApiKeyLookupsThrottled, authenticate_api_key_limited
from chatplatform.client_address import client_ip
from chatplatform.models import MembershipRole
from chats.api.drf_internals import django_request
from chats.api.principal import ApiPrincipal, enter_request_scope

BEARER = b"bearer"


class ApiKeyAuthentication(BaseAuthentication):
    """``Authorization: Bearer <key>``: the key's user (or the tenant's service user) in the
    key's tenant. A missing header defers to the next class; a malformed, unknown or revoked
    key is 401; past the failures allowed per client address, every key is 429
    (``chatplatform.bruteforce``)."""

    def authenticate(self, request: Request) -> tuple[Any, ApiPrincipal] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != BEARER:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: use 'Bearer <key>'."
            )
        try:
            raw_key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid API key.") from None
        try:
            found = authenticate_api_key_limited(raw_key, client_ip(django_request(request)))
        except ApiKeyLookupsThrottled as throttled:
            raise exceptions.Throttled(
                throttled.retry_after, "Too many failed API-key attempts from this address."
            ) from None
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        enter_request_scope(django_request(request), found.tenant)
        principal = ApiPrincipal(
            tenant=found.tenant, user=found.user, is_admin=found.is_admin, key=found.key
        )
        return found.user, principal

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class TenantSessionAuthentication(SessionAuthentication):
    """The browser session (CSRF enforced): the user in the tenant the session chose, as
    resolved by ``TenantScopeMiddleware`` (``request.tenant``). A logged-in user without an
    active membership is refused (403)."""

    def authenticate(self, request: Request) -> tuple[Any, ApiPrincipal] | None:
        result = super().authenticate(request)
        if result is None:
            return None
        user = result[0]
        wrapped = django_request(request)
        tenant = getattr(wrapped, "tenant", None)
        membership = getattr(wrapped, "membership", None)
        if tenant is None or membership is None:
            raise exceptions.PermissionDenied("You are not a member of an active tenant.")
        enter_request_scope(wrapped, tenant)
        principal = ApiPrincipal(
            tenant=tenant, user=user, is_admin=membership.role == MembershipRole.ADMIN, key=None
        )
        return user, principal
