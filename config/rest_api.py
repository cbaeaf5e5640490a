"""Settings of the REST API (``chats.api``): Django REST framework's and the OpenAPI schema's.

Integrations use /api/v1/ with tenant API keys (Authorization: Bearer <key>); the browser uses
its session (CSRF enforced). Throttle counters live in the default cache (Redis when
REDIS_URL is set). Every error answers {"error": {"code", "message", "fields"}}.
"""

from __future__ import annotations

from typing import Any

import environ


def rest_framework_settings(env: environ.Env) -> dict[str, Any]:
    """``REST_FRAMEWORK``: the API's authentication, permissions, throttles (rates from the
    environment), parsers, renderers and error format."""
    return {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "chats.api.authentication.ApiKeyAuthentication",
            "chats.api.authentication.TenantSessionAuthentication",
        ],
        "DEFAULT_PERMISSION_CLASSES": ["chats.api.permissions.HasTenantPrincipal"],
        "DEFAULT_THROTTLE_CLASSES": [
            "chats.api.throttling.KeyRateThrottle",
            "chats.api.throttling.UserRateThrottle",
        ],
        "DEFAULT_THROTTLE_RATES": {
            "api_key": env.str("API_THROTTLE_KEY_RATE", default="600/min"),
            "api_user": env.str("API_THROTTLE_USER_RATE", default="600/min"),
        },
        "DEFAULT_PARSER_CLASSES": ["chats.api.parsers.LimitedJSONParser"],
        "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
        "EXCEPTION_HANDLER": "chats.api.errors.exception_handler",
        "DEFAULT_SCHEMA_CLASS": "chats.api.schema.ApiAutoSchema",
        "TEST_REQUEST_DEFAULT_FORMAT": "json",
        "UNICODE_JSON": True,
    }


#: ``SPECTACULAR_SETTINGS``: the OpenAPI schema served at /api/v1/schema/.
API_SCHEMA_SETTINGS: dict[str, Any] = {
    "TITLE": "chatplatform API",
    "DESCRIPTION": (
        "REST API for integrations: conversations, messages (JSON or server-sent events), "
        "context previews and turn records, summaries, user facts, usage, policy and models. "
        "Authenticate with a tenant API key (`Authorization: Bearer <key>`) or the browser "
        'session. Every error is `{"error": {"code", "message", "fields"}}`.'
    ),
    "VERSION": "1.0.0",
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "MessageRoleEnum": "chatplatform.models.conversations.MessageRole",
        "MessageStatusEnum": "chatplatform.models.conversations.Status",
        "MemoryKindEnum": "chatplatform.core.memory.kinds.memory_kind_choices",
    },
}
