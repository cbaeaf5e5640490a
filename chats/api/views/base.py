"""The base of every API view: tenant scope for the whole request, body size limit, errors
always as JSON, and helpers that resolve objects for the caller (404 alike for missing and
for another tenant's)."""

from __future__ import annotations

from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponseBase
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.generics import GenericAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.models.conversations import Conversation
from chats.api.parsers import max_body_bytes, too_large
from chats.api.principal import ApiPrincipal, leave_request_scope
from chats.selectors import conversation_for_member

S = TypeVar("S", bound=serializers.Serializer)

#: Ids above this are not ids of ours (and would overflow a bigint column).
MAX_ID = 2**62


class TenantAPIView(GenericAPIView):
    # Every API view. Authentication (see ``chats.api.authentication``) enters the caller's
    # tenant scope; it is left when the request ends, whatever happens. (A comment, not a
    # docstring: the OpenAPI schema would take a docstring as every operation's description.)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            leave_request_scope(request)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        limit = max_body_bytes()
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            raise too_large(limit)
        super().initial(request, *args, **kwargs)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # Errors are JSON whatever was negotiated (e.g. an event stream that never started).
        if (
            isinstance(response, Response)
            and response.status_code >= 400
            and not isinstance(getattr(request, "accepted_renderer", None), JSONRenderer)
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

    @property
    def principal(self) -> ApiPrincipal:
        principal = self.request.auth
        assert isinstance(principal, ApiPrincipal)  # HasTenantPrincipal guarantees it
        return principal

    def conversation(self, conversation_id: int) -> Conversation:
        """The conversation if the caller takes part in it, in the caller's tenant; else 404."""
        found = None
        if 0 < conversation_id <= MAX_ID:
            found = conversation_for_member(
                self.principal.user, conversation_id, tenant_id=self.principal.tenant_id
            )
        if found is None:
            raise NotFound("No such conversation.")
        return found

    def query(self, serializer_class: type[S]) -> dict[str, Any]:
        """The validated query parameters (400 with field errors otherwise)."""
        # A plain dict, not the QueryDict: DRF would read an empty value ("?policy=") as
        # absent; here it is validated like any other value (and refused where not allowed).
        serializer = serializer_class(data=self.request.query_params.dict())
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def body(self, serializer_class: type[S], *, partial: bool = False) -> dict[str, Any]:
        """The validated JSON body (400 with field errors otherwise)."""
        data = self.request.data
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Send a JSON object."]})
        serializer = serializer_class(data=data, partial=partial)
        # A field the endpoint does not take is refused, not ignored: a misspelt field name
        # would otherwise be dropped without a word (and a large one read for nothing).
        unknown = sorted(set(data) - set(serializer.fields))
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


def valid_id(value: int) -> bool:
    return 0 < value <= MAX_ID
