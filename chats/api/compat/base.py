"""The base of the SDK-compatible API's views: the API key as the protocol's SDK sends it, the
REST API's throttles and body limit, and every error in the protocol's own shape and status
(never an HTML page)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.bruteforce import ApiKeyLookupsThrottled, authenticate_api_key_limited
from chatplatform.client_address import client_ip
from chats.api.compat.protocols import CompatProtocol, protocol_for_path
from chats.api.drf_internals import django_request
from chats.api.errors import ApiError, error_messages, handled_exception
from chats.api.principal import ApiPrincipal, enter_request_scope
from chats.api.views.base import TenantAPIView


class CompatKeyAuthentication(BaseAuthentication):
    """The tenant API key where ``protocol``'s SDK sends it; no key, or a malformed, unknown or
    revoked one, is 401; past the failures allowed per address, 429."""

    def __init__(self, protocol: CompatProtocol) -> None:
        self.protocol = protocol

    def authenticate(self, request: Request) -> tuple[Any, ApiPrincipal]:
        wrapped = django_request(request)
        raw_key = self.protocol.raw_key(wrapped)
        if raw_key is None:
            raise exceptions.NotAuthenticated("No API key: send the tenant's API key.")
        try:
            found = authenticate_api_key_limited(raw_key, client_ip(wrapped))
        except ApiKeyLookupsThrottled as throttled:
            raise exceptions.Throttled(
                throttled.retry_after, "Too many failed API-key attempts from this address."
            ) from None
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        enter_request_scope(wrapped, found.tenant)
        principal = ApiPrincipal(
            tenant=found.tenant, user=found.user, is_admin=found.is_admin, key=found.key
        )
        return found.user, principal

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="compat"'


def _param(exc: exceptions.APIException) -> str | None:
    fields = exc.fields if isinstance(exc, ApiError) else exc.detail
    if isinstance(fields, dict) and fields:
        return str(next(iter(fields)))
    return None


def _code(exc: exceptions.APIException) -> str:
    if isinstance(exc, ApiError):
        return exc.error_code
    if isinstance(exc, exceptions.ValidationError):
        return "invalid_request"
    if isinstance(exc, exceptions.AuthenticationFailed | exceptions.NotAuthenticated):
        return "invalid_api_key"
    codes = exc.get_codes()
    return codes if isinstance(codes, str) else str(exc.default_code)


def compat_exception_handler(
    protocol: CompatProtocol,
) -> Callable[[Exception, dict[str, Any]], Response]:
    """DRF's exception handler for ``protocol``'s views: the REST API's statuses and headers
    (``Retry-After``), the protocol's error body."""

    def handle(exc: Exception, context: dict[str, Any]) -> Response:
        handled = handled_exception(exc, context, where="the SDK-compatible API")
        if handled is None:
            return Response(
                protocol.error_body(500, "An unexpected error occurred.", "internal_error"),
                status=status.HTTP_500_INTERNAL_SERVER_ERROR,
            )
        exc, response = handled
        message = exc.message if isinstance(exc, ApiError) else " ".join(error_messages(exc.detail))
        response.data = protocol.error_body(
            response.status_code, message or str(exc.default_detail), _code(exc), _param(exc)
        )
        return response

    return handle


class CompatView(TenantAPIView):
    # A view of the SDK-compatible API for ``protocol`` (a comment, not a docstring: see the
    # REST API's base view). Authentication is the protocol's key only, never the session.
    protocol: CompatProtocol
    schema = None  # not part of the REST API's OpenAPI document

    def get_authenticators(self) -> list[BaseAuthentication]:
        return [CompatKeyAuthentication(self.protocol)]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response]:
        return compat_exception_handler(self.protocol)


def compat_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any path under a protocol's prefix that names no endpoint: 404 in its shape."""
    protocol = protocol_for_path(request.path)
    message = "No endpoint at this address."
    body = protocol.error_body(404, message, "not_found") if protocol else {"error": message}
    return JsonResponse(body, status=status.HTTP_404_NOT_FOUND)
