from __future__ import annotations

from django.contrib import admin

from chatplatform.admin_base import TenantScopedAdmin
from memory.models import UserFact


@admin.register(UserFact)
class UserFactAdmin(TenantScopedAdmin):
    list_display = ("user", "key", "text", "source", "created_at", "superseded_at")
    list_filter = ("source",)
    search_fields = ("text", "key")
