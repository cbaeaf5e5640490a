from __future__ import annotations

from django.contrib import admin

from chatplatform.admin.base import TenantScopedAdmin
from summaries.models import Summary


@admin.register(Summary)
class SummaryAdmin(TenantScopedAdmin):
    list_display = (
        "conversation",
        "kind",
        "level",
        "first_seq",
        "last_seq",
        "token_count",
        "source_tokens",
        "model",
        "created_at",
    )
    list_filter = ("kind",)
    readonly_fields = ("merged_into", "superseded_at", "created_at")
