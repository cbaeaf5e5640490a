"""An admin site that lets tenant admins in, and nobody else without the staff flag."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest


class ChatPlatformAdminSite(admin.AdminSite):
    site_header = "chatplatform administration"
    site_title = "chatplatform admin"
    index_title = "Tenant administration"

    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        # Imported here: this module is named in INSTALLED_APPS (the admin's AppConfig), so it
        # loads before any model exists and cannot import one at the top.
        from chatplatform.selectors import is_tenant_admin

        if not (user.is_active and user.is_staff):
            return False
        return bool(user.is_superuser or is_tenant_admin(user))


class ChatPlatformAdminConfig(AdminConfig):
    default_site = "console.site.ChatPlatformAdminSite"
