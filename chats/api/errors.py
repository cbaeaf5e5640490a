"""One error format for every API failure::

    {"error": {"code": "not_found", "message": "Not found.", "fields": {}}}

``code`` is machine-readable, ``message`` is for people, ``fields`` maps input fields to their
problems (validation errors only; empty otherwise). The exception handler reshapes DRF's
errors (validation, 401, 403, 404, 405, 406, 415, 429), the API's own (413 and service
rejections), and turns anything unexpected into a logged 500 with the same shape.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from chatplatform.bruteforce import CACHE_UNAVAILABLE
from chatplatform.db import database_unreachable

logger = logging.getLogger("chats.api")


class ApiError(exceptions.APIException):
    """An error with an explicit status, code, message and optional field errors."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        fields: dict[str, list[str]] | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.message = message
        self.fields = fields or {}


class RequestTooLarge(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "too_large", message)


#: Seconds a client is told to wait (``Retry-After``) when a service the request needs is down.
RETRY_AFTER_UNAVAILABLE_SECONDS = 10


class ServiceUnavailable(ApiError):
    """503: a service the request needs (Redis: reply coordination, the channel layer; the
    database, when it takes no more connections) cannot
    be reached. Nothing was stored, or what was stored is answered when the client sends it
    again with the same ``client_id``."""

    def __init__(self) -> None:
        super().__init__(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "service_unavailable",
            "The service is briefly unavailable; nothing was lost. Try again in a few seconds "
            "(a message sent again with the same client_id or Idempotency-Key is not "
            "stored twice).",
        )


class SpendLimitReached(ApiError):
    """429 ``quota_exceeded``: a hard spending limit of the tenant, the member or the key is
    reached; nothing was stored. ``Retry-After`` says when the month ends; SDKs are told not
    to retry (``x-should-retry: false``)."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(status.HTTP_429_TOO_MANY_REQUESTS, "quota_exceeded", message)
        self.wait = retry_after


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def error_messages(detail: Any) -> list[str]:
    """The messages of a REST framework error ``detail`` (a string, list or mapping), flat."""
    if isinstance(detail, dict):
        return [m for value in detail.values() for m in error_messages(value)]
    if isinstance(detail, (list, tuple)):
        return [m for value in detail for m in error_messages(value)]
    return [str(detail)]


def _field_errors(detail: Any) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        return {str(name): error_messages(value) for name, value in detail.items()}
    return {"non_field_errors": error_messages(detail)}


def _code_of(exc: exceptions.APIException) -> str:
    if isinstance(exc, ApiError):
        return exc.error_code
    if isinstance(exc, exceptions.ValidationError):
        return "invalid"
    codes = exc.get_codes()
    if isinstance(codes, str):
        return codes
    return str(exc.default_code)


def handled_exception(
    exc: Exception, context: dict[str, Any], *, where: str
) -> tuple[exceptions.APIException, Response] | None:
    """What every API's exception handler does before it writes its error body: Django's
    body limit as 413, an unreachable service as 503 with ``Retry-After``, REST framework's
    statuses and headers, Django's 404 / 403 as REST framework's. ``None`` for an
    unexpected error, logged (``where``: which API) with its transaction rolled back: the
    caller answers 500."""
    if isinstance(exc, RequestDataTooBig):
        # Django's own body limit, should a body reach it: the request is too large, not a
        # server error.
        exc = RequestTooLarge("The request body is too large.")
    if isinstance(exc, CACHE_UNAVAILABLE):
        logger.warning("a service the API needs is unavailable: %s", exc)
        exc = ServiceUnavailable()
    elif database_unreachable(exc):
        # No connection, so nothing of this request was written: the same request later can
        # succeed (a 500 would say the request itself is at fault).
        logger.warning("the database is unreachable: %s", exc)
        set_rollback()
        exc = ServiceUnavailable()
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("unexpected error in %s", where, exc_info=exc)
        set_rollback()
        return None
    if not isinstance(exc, exceptions.APIException):
        # Django's Http404 / PermissionDenied, converted by DRF.
        exc = (
            exceptions.NotFound()
            if response.status_code == status.HTTP_404_NOT_FOUND
            else exceptions.PermissionDenied()
        )
    if isinstance(exc, ServiceUnavailable):
        response["Retry-After"] = str(RETRY_AFTER_UNAVAILABLE_SECONDS)
    if isinstance(exc, SpendLimitReached):
        response["x-should-retry"] = "false"
    return exc, response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's ``EXCEPTION_HANDLER``: every failure as the one error format."""
    handled = handled_exception(exc, context, where="the API")
    if handled is None:
        return Response(
            error_body("internal_error", "An unexpected error occurred."),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    exc, response = handled
    if isinstance(exc, ApiError):
        response.data = error_body(exc.error_code, exc.message, exc.fields)
    elif isinstance(exc, exceptions.ValidationError):
        fields = _field_errors(exc.detail)
        first = next((m for messages in fields.values() for m in messages), "Invalid input.")
        response.data = error_body("invalid", first, fields)
    else:
        message = " ".join(error_messages(exc.detail)) or str(exc.default_detail)
        response.data = error_body(_code_of(exc), message)
    return response


def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any path under the API that names no endpoint."""
    return JsonResponse(
        error_body("not_found", "No API endpoint at this address."),
        status=status.HTTP_404_NOT_FOUND,
    )
