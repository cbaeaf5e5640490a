"""Summaries of a conversation and requests to refresh them."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from chats.api.serializers.summaries import (
    SummaryListSerializer,
    SummaryQuerySerializer,
    SummaryRefreshSerializer,
    SummarySerializer,
)
from chats.api.services import summaries_refresh_request
from chats.api.views.base import TenantAPIView
from summaries.selectors import summaries_for

TAG = ["summaries"]


class SummaryListView(TenantAPIView):
    serializer_class = SummaryListSerializer

    @extend_schema(
        tags=TAG,
        operation_id="summaries_list",
        summary="The conversation's summaries with their source ranges",
        parameters=[SummaryQuerySerializer],
        responses=SummaryListSerializer,
    )
    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        params = self.query(SummaryQuerySerializer)
        infos = summaries_for(conversation, include_history=params["history"])
        return Response({"results": SummarySerializer(infos, many=True).data})


class SummaryRefreshView(TenantAPIView):
    serializer_class = SummaryRefreshSerializer

    @extend_schema(
        tags=TAG,
        operation_id="summaries_refresh",
        summary="Ask for the rolling summaries to be brought up to date",
        description="Dispatches the idempotent refresh task; it does nothing when no summary "
        "is due.",
        request=None,
        responses={202: OpenApiResponse(SummaryRefreshSerializer, description="Requested.")},
    )
    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        summaries_refresh_request(conversation)
        return Response({"status": "queued"}, status=status.HTTP_202_ACCEPTED)
