"""Context: what the next turn would send, and what a past turn did send."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.core.context.budget import PolicyError
from chats.api import selectors
from chats.api.errors import ApiError
from chats.api.serializers.context import (
    ContextPreviewSerializer,
    PreviewQuerySerializer,
    TurnRecordSerializer,
)
from chats.api.views.base import TenantAPIView, valid_id
from chats.assembly.preview import preview_next_turn

TAG = ["context"]


class ContextPreviewView(TenantAPIView):
    serializer_class = ContextPreviewSerializer

    @extend_schema(
        tags=TAG,
        operation_id="context_preview",
        summary="What the next turn would send, section by section (nothing is stored)",
        parameters=[PreviewQuerySerializer],
        responses=ContextPreviewSerializer,
    )
    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        params = self.query(PreviewQuerySerializer)
        policy = None
        if "policy" in params:
            policy = selectors.policy_visible(self.principal.tenant_id, params["policy"])
            if policy is None:
                raise ValidationError({"policy": ["No such policy."]})
        try:
            data = preview_next_turn(
                conversation,
                text=params.get("message", ""),
                author=self.principal.user,
                policy=policy,
            )
        except PolicyError as exc:
            raise ApiError(status.HTTP_400_BAD_REQUEST, "policy_invalid", str(exc)) from None
        return Response(ContextPreviewSerializer(data).data)


class TurnRecordView(TenantAPIView):
    serializer_class = TurnRecordSerializer

    @extend_schema(
        tags=TAG,
        operation_id="context_turn_record",
        summary="The stored record of a turn, by its user message or its reply",
        responses=TurnRecordSerializer,
    )
    def get(self, request: Request, conversation_id: int, message_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        record = (
            selectors.turn_record_for(conversation, message_id) if valid_id(message_id) else None
        )
        if record is None:
            raise NotFound("No turn record for this message.")
        return Response(TurnRecordSerializer(record).data)
