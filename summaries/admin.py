from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from chatplatform.admin_base import TenantScopedAdmin
from summaries.models import Summary, TokenBackfillState


@admin.register(Summary)
class SummaryAdmin(TenantScopedAdmin):
    list_display = (
        "conversation",
        "kind",
        "level",
        "covers",
        "token_count",
        "source_tokens",
        "model",
        "prompt_version",
        "cost_usd",
        "is_current",
        "created_at",
    )
    list_filter = ("kind", "level")
    readonly_fields = (
        "first_message",
        "last_message",
        "first_seq",
        "last_seq",
        "period_start",
        "period_end",
        "token_count",
        "token_counter",
        "source_tokens",
        "model",
        "prompt_version",
        "cost_usd",
        "merged_into",
        "superseded_at",
        "created_at",
    )

    @admin.display(description="messages")
    def covers(self, obj: Summary) -> str:
        return f"{obj.first_seq}-{obj.last_seq}"

    @admin.display(boolean=True, description="current")
    def is_current(self, obj: Summary) -> bool:
        return obj.merged_into_id is None and obj.superseded_at is None


@admin.register(TokenBackfillState)
class TokenBackfillStateAdmin(TenantScopedAdmin):
    list_display = ("tenant", "signature", "verified_upto_id", "cursor_id", "updated_at")
    readonly_fields = ("signature", "verified_upto_id", "cursor_id", "updated_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
