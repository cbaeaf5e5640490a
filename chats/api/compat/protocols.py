"""The wire protocols the SDK-compatible API speaks, one registry entry each: where the API key
travels, the shape and type names of an error, the URL prefix. Everything else asks the entry
(:func:`protocol_for_path`), never compares a protocol's name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest

#: Every path of the SDK-compatible API starts so.
COMPAT_PREFIX = "/compat/"


def _openai_error(error_type: str, message: str, code: str | None, param: str | None) -> Any:
    return {"error": {"message": message, "type": error_type, "code": code, "param": param}}


def _anthropic_error(error_type: str, message: str, code: str | None, param: str | None) -> Any:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _bearer_key(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return key.strip()


def _x_api_key(request: HttpRequest) -> str | None:
    key = request.headers.get("x-api-key", "").strip()
    return key or _bearer_key(request)


@dataclass(frozen=True)
class CompatProtocol:
    """One SDK's protocol: ``prefix`` is the SDK's ``base_url`` path; ``raw_key`` reads the API
    key as the SDK sends it; ``error_types`` names an error by its HTTP status (``fallback``
    otherwise); ``shape`` builds the error body from its type, message, code and parameter."""

    label: str
    prefix: str
    raw_key: Callable[[HttpRequest], str | None]
    error_types: Mapping[int, str]
    fallback: str
    shape: Callable[[str, str, str | None, str | None], Any]
    #: Where the client names its conversation (a request header).
    conversation_header: str = "X-Conversation-Id"
    #: Error types named by the error's code rather than its status.
    types_by_code: Mapping[str, str] = field(default_factory=dict)

    def error_body(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ) -> Any:
        """The protocol's error body for an HTTP ``status``."""
        error_type = self.types_by_code.get(code or "") or self.error_types.get(
            status, self.fallback
        )
        return self.shape(error_type, message, code, param)


OPENAI = CompatProtocol(
    label="OpenAI",
    prefix=COMPAT_PREFIX + "openai/v1/",
    raw_key=_bearer_key,
    error_types={
        400: "invalid_request_error",
        401: "invalid_request_error",
        403: "invalid_request_error",
        404: "invalid_request_error",
        405: "invalid_request_error",
        413: "invalid_request_error",
        415: "invalid_request_error",
        429: "rate_limit_exceeded",
        502: "server_error",
        503: "server_error",
        504: "server_error",
    },
    fallback="server_error",
    shape=_openai_error,
    # A spending limit reached is OpenAI's exhausted quota (429 ``insufficient_quota``).
    types_by_code={"quota_exceeded": "insufficient_quota"},
)

ANTHROPIC = CompatProtocol(
    label="Anthropic",
    prefix=COMPAT_PREFIX + "anthropic/v1/",
    raw_key=_x_api_key,
    error_types={
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        405: "invalid_request_error",
        413: "request_too_large",
        415: "invalid_request_error",
        429: "rate_limit_error",
        502: "api_error",
        503: "overloaded_error",
        504: "api_error",
    },
    fallback="api_error",
    shape=_anthropic_error,
    types_by_code={"quota_exceeded": "billing_error"},
)

PROTOCOLS = (OPENAI, ANTHROPIC)


def protocol_for_path(path: str) -> CompatProtocol | None:
    """The protocol whose prefix ``path`` is under (with or without its trailing slash), or
    None outside the SDK-compatible API."""
    for protocol in PROTOCOLS:
        if path.startswith(protocol.prefix) or path == protocol.prefix.rstrip("/"):
            return protocol
    return None
