from __future__ import annotations

from django.contrib import admin

from chatplatform.admin_base import TenantScopedAdmin
from memory.models import UserFact


@admin.register(UserFact)
class UserFactAdmin(TenantScopedAdmin):
    """Memories of every kind (facts, standing instructions, preferences), filtered by kind."""

    list_display = ("user", "kind", "key", "text", "source", "created_at", "superseded_at")
    list_filter = ("kind", "source")
    search_fields = ("text", "key")
