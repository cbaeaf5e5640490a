"""OpenAPI description of the API (drf-spectacular): the error format on every operation,
and the two authentication schemes."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorDetailSerializer(serializers.Serializer):
    """What went wrong."""

    # Fields built in get_fields: a field named ``fields`` would shadow ``Serializer.fields``.

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "code": serializers.CharField(
                help_text="Machine-readable, e.g. not_found, invalid, too_large."
            ),
            "message": serializers.CharField(help_text="For people."),
            "fields": serializers.DictField(
                child=serializers.ListField(child=serializers.CharField()),
                help_text="Problems per input field (validation errors; empty otherwise).",
            ),
        }


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


ERROR_DESCRIPTIONS = {
    400: "Invalid input (see error.fields), or a request the service rejected.",
    401: "No credentials, or an invalid or revoked API key.",
    403: "Authenticated but not allowed (e.g. CSRF failure, not a tenant member).",
    404: "No such object in the caller's tenant (another tenant's looks the same).",
    406: "The Accept header asks for a media type this operation cannot produce.",
    409: "The request conflicts with the tenant's settings.",
    413: "The request body or the message is too large.",
    415: "The body is not JSON.",
    429: "Too many requests (Retry-After tells when to retry).",
    503: "A service the request needs is briefly unreachable; nothing was stored (Retry-After "
    "tells when to retry; a message sent again with the same client_id is stored once).",
}
COMMON_ERRORS = (400, 401, 403, 404, 406, 429)
BODY_ERRORS = (413, 415)
#: Writes may need Redis (reply coordination, the channel layer); reads never do.
WRITE_ERRORS = (503,)


def error_response(status_code: int, description: str | None = None) -> OpenApiResponse:
    return OpenApiResponse(
        ErrorSerializer, description=description or ERROR_DESCRIPTIONS[status_code]
    )


class ApiAutoSchema(AutoSchema):
    """Adds the error responses every operation can give to what each view declares."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        codes = list(COMMON_ERRORS)
        if self.method in ("POST", "PUT", "PATCH"):
            codes += BODY_ERRORS + WRITE_ERRORS
        for code in codes:
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(
                    error_response(code), str(code), ("application/json",), direction
                )
        return responses


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chats.api.authentication.ApiKeyAuthentication"
    name = "apiKey"
    priority = 1

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A tenant API key: `Authorization: Bearer cpk_...`.",
        }


class TenantSessionScheme(OpenApiAuthenticationExtension):
    target_class = "chats.api.authentication.TenantSessionAuthentication"
    name = "session"
    priority = 1

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "The browser session; unsafe methods need the CSRF token "
            "(X-CSRFToken header).",
        }
