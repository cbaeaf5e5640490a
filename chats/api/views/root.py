"""The API's root: what there is under ``/api/v1/``, for anyone (like the schema and its
docs it names no tenant's data, so it asks for no credential)."""

from __future__ import annotations

import re
from typing import Any

from django.urls import URLPattern, reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

#: Django's ``<int:conversation_id>`` as OpenAPI writes it: ``{conversation_id}``.
_CONVERTER = re.compile(r"<(?:[^>:]+:)?([^>]+)>")
#: Methods every view answers, which say nothing about the endpoint.
_GENERIC_METHODS = {"options", "head"}

RootSerializer = inline_serializer(
    name="ApiRoot",
    fields={
        "authentication": serializers.CharField(),
        "schema": serializers.CharField(),
        "docs": serializers.CharField(),
        "endpoints": inline_serializer(
            name="ApiEndpoint",
            many=True,
            fields={
                "name": serializers.CharField(),
                "path": serializers.CharField(),
                "methods": serializers.ListField(child=serializers.CharField()),
            },
        ),
    },
)


def endpoints(prefix: str) -> list[dict[str, Any]]:
    """Every route of the API under ``prefix``: its name, path template and methods."""
    from chats.api import urls  # the routes import this view

    found = []
    for pattern in urls.urlpatterns:
        view = getattr(pattern.callback, "view_class", None)
        if not isinstance(pattern, URLPattern) or view is None or view is ApiRootView:
            continue
        methods = [
            method.upper()
            for method in view.http_method_names
            if method not in _GENERIC_METHODS and hasattr(view, method)
        ]
        path = prefix + _CONVERTER.sub(r"{\1}", str(pattern.pattern))
        found.append({"name": pattern.name, "path": path, "methods": methods})
    return found


class ApiRootView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(
        tags=["api"],
        operation_id="api_root",
        summary="The API's endpoints, the schema and the docs (no credential needed)",
        auth=[],
        responses=RootSerializer,
    )
    def get(self, request: Request) -> Response:
        prefix = reverse("api:root")
        return Response(
            {
                "authentication": (
                    "Authorization: Bearer <tenant API key>, or the browser session "
                    "(with its CSRF token for writes)"
                ),
                "schema": reverse("api:schema"),
                "docs": reverse("api:docs"),
                "endpoints": endpoints(prefix),
            }
        )
