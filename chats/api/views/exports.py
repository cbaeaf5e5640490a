"""Exports of the caller's conversations: start one (a job), follow it, download its file
while it is available (the caller's own exports only; another user's or tenant's: 404)."""

from __future__ import annotations

from typing import Any

from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.models import Transfer, TransferKind
from chats.api.schema import error_response
from chats.api.serializers.exports import (
    ExportListSerializer,
    ExportRequestSerializer,
    ExportSerializer,
)
from chats.api.views.base import TenantAPIView, valid_id
from chats.transfer.files import export_available, export_file
from chats.transfer.jobs import transfer_export_start, transfer_get, transfers_of

TAG = ["exports"]


def _data(row: Transfer) -> dict[str, Any]:
    download = reverse("api:export-download", args=[row.pk]) if export_available(row) else None
    return {**ExportSerializer(row).data, "download": download}


class ExportListView(TenantAPIView):
    serializer_class = ExportSerializer

    @extend_schema(
        tags=TAG,
        operation_id="exports_list",
        summary="The caller's latest exports",
        responses=ExportListSerializer,
    )
    def get(self, request: Request) -> Response:
        principal = self.principal
        rows = transfers_of(principal.tenant, principal.user)
        return Response({"results": [_data(r) for r in rows if r.kind == TransferKind.EXPORT]})

    @extend_schema(
        tags=TAG,
        operation_id="exports_create",
        summary="Export the caller's conversations (a background job)",
        request=ExportRequestSerializer,
        responses={202: OpenApiResponse(ExportSerializer, description="Queued.")},
    )
    def post(self, request: Request) -> Response:
        body = self.body(ExportRequestSerializer)
        principal = self.principal
        row = transfer_export_start(principal.tenant, principal.user, body["format"])
        return Response(_data(row), status=status.HTTP_202_ACCEPTED)


class ExportDetailView(TenantAPIView):
    serializer_class = ExportSerializer

    def row(self, export_id: int) -> Transfer:
        principal = self.principal
        found = None
        if valid_id(export_id):
            found = transfer_get(principal.tenant_id, export_id, principal.user, admin=False)
        if found is None or found.kind == TransferKind.IMPORT:
            raise NotFound("No such export.")
        return found

    @extend_schema(
        tags=TAG,
        operation_id="exports_retrieve",
        summary="An export's progress and, when done, where to download it",
        responses={200: ExportSerializer, 404: error_response(404, "No such export.")},
    )
    def get(self, request: Request, export_id: int) -> Response:
        return Response(_data(self.row(export_id)))


class ExportDownloadView(ExportDetailView):
    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        tags=TAG,
        operation_id="exports_download",
        summary="The export's file (JSON, or a zip of Markdown files)",
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY),
            404: error_response(404, "No such export, not done, or expired: all alike."),
        },
    )
    def get(self, request: Request, export_id: int) -> FileResponse:  # type: ignore[override]
        opened = export_file(self.row(export_id))
        if opened is None:
            raise NotFound("No such export file: not done yet, or its link expired.")
        handle, filename = opened
        return FileResponse(handle, as_attachment=True, filename=filename)
