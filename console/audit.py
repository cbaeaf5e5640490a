"""The audit log in the admin: read-only for everyone; the operator sees every entry, a
tenant admin the entries of the tenants they administer; selected entries export as JSON
lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest, StreamingHttpResponse

from chatplatform.admin_base import _tenant_ids
from chatplatform.models import AuditEvent

#: The fields of an exported entry, in order.
EXPORTED = (
    "id",
    "created_at",
    "tenant_id",
    "actor_id",
    "actor_label",
    "action",
    "target_type",
    "target_id",
    "target_label",
    "changes",
    "ip_address",
    "user_agent",
)


def json_lines(queryset: models.QuerySet) -> Iterator[str]:
    """One JSON object per entry, oldest first."""
    for row in queryset.order_by("created_at", "pk").values(*EXPORTED).iterator():
        row["created_at"] = row["created_at"].isoformat()
        yield json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n"


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "tenant",
        "actor_label",
        "action",
        "target_type",
        "target_label",
        "ip_address",
    )
    list_filter = ("action", "target_type")
    search_fields = ("actor_label", "target_label", "target_id")
    date_hierarchy = "created_at"
    actions = ("export_json_lines",)
    readonly_fields = EXPORTED[1:]

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        queryset = super().get_queryset(request).select_related("tenant")
        if request.user.is_superuser:
            return queryset
        return queryset.filter(tenant_id__in=_tenant_ids(request))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser or _tenant_ids(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if request.user.is_superuser:
            return True
        ids = _tenant_ids(request)
        return bool(ids) and (obj is None or obj.tenant_id in ids)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Export the selected entries as JSON lines")
    def export_json_lines(
        self, request: HttpRequest, queryset: models.QuerySet
    ) -> StreamingHttpResponse:
        response = StreamingHttpResponse(json_lines(queryset), content_type="application/jsonl")
        response["Content-Disposition"] = 'attachment; filename="audit.jsonl"'
        return response
