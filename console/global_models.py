"""Admins of models that belong to no tenant (users, groups, beat schedules), as tenant admins
see them.

Django answers a user without permissions on such a model differently for an object that
exists (403) and one that does not (redirect "does not exist") on some pages (history), which
would tell a tenant admin which user ids of other tenants exist. Here an object the user may
neither view nor change is looked up as missing, so both answers are the same.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.http import HttpRequest

from chatplatform.admin_base import AuditedAdminMixin
from chatplatform.django_internals import admin_registrations
from chatplatform.models import Tenant


class MissingWithoutPermissionMixin:
    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> models.Model | None:
        if not request.user.is_superuser and not self.has_view_or_change_permission(request):  # type: ignore[attr-defined]
            return None
        return super().get_object(request, object_id, from_field)  # type: ignore[misc]


def _is_tenant_owned(model: type[models.Model]) -> bool:
    try:
        model._meta.get_field("tenant")
    except FieldDoesNotExist:
        return False
    return True


def hide_global_objects(site: admin.AdminSite) -> None:
    """Give every registered admin of a model without a tenant (except Tenant, which has its
    own scoping) the mixin, and the audit log's. Call after the apps that register such models
    (auth, beat)."""
    for model, model_admin in admin_registrations(site):
        if model is Tenant or _is_tenant_owned(model):
            continue
        if isinstance(model_admin, MissingWithoutPermissionMixin):
            continue
        cls: Any = type(model_admin)
        wrapped = type(cls.__name__, (MissingWithoutPermissionMixin, AuditedAdminMixin, cls), {})
        site.unregister(model)
        site.register(model, wrapped)
