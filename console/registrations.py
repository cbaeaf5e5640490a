"""Model admins of the platform core (tenants, keys, profiles, policies)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters

from chatplatform.admin_base import AuditedAdminMixin, TenantScopedAdmin, _tenant_ids
from chatplatform.audit import audit_record
from chatplatform.core.llm.spend_limits import API_KEY, MEMBER, TENANT
from chatplatform.models import (
    ApiKey,
    AuditAction,
    ContextPolicy,
    Membership,
    ModelProfile,
    Tenant,
)
from chatplatform.services import api_key_revoke, membership_remove, user_sync_staff
from console.exports import tenant_exports_view
from console.model_catalog import ModelCatalogActionMixin
from console.profile_form import ModelProfileForm
from console.reports import calibrations, job_status, usage_report
from console.spending import SPEND_LIMIT_FIELDS, SpendUsedMixin


@admin.register(Tenant)
class TenantAdmin(SpendUsedMixin, AuditedAdminMixin, admin.ModelAdmin):
    list_display = (
        "name",
        "slug",
        "is_active",
        "active_policy",
        "retention_days",
        "spend_hard_usd",
        "created_at",
    )
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    spender = TENANT
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "slug",
                    "is_active",
                    "active_policy",
                    "service_user",
                    "retention_days",
                    "time_zone",
                )
            },
        ),
        (
            "Monthly spending limit (set by the platform operator)",
            {"fields": (*SPEND_LIMIT_FIELDS, "used_this_month")},
        ),
    )

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(pk__in=_tenant_ids(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if request.user.is_superuser:
            return ("used_this_month",)
        # The tenant's own spending limit is the operator's to set.
        return ("name", "slug", "is_active", "service_user", *SPEND_LIMIT_FIELDS, "used_this_month")

    def get_prepopulated_fields(self, request: HttpRequest, obj: Any = None) -> dict[str, Any]:
        # The slug is read-only for tenant admins: a prepopulated field must be in the form.
        return dict(self.prepopulated_fields) if request.user.is_superuser else {}

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        form = super().get_form(request, obj, change=change, **kwargs)
        field = form.base_fields.get("active_policy")
        if field is not None and obj is not None:
            # Only this tenant's own policies and the presets can be its active policy.
            field.queryset = field.queryset.filter(  # type: ignore[attr-defined]
                models.Q(tenant=obj) | models.Q(tenant__isnull=True)
            )
        return form

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser or _tenant_ids(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if request.user.is_superuser:
            return True
        return bool(_tenant_ids(request)) and (obj is None or obj.pk in _tenant_ids(request))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "active_policy" and not request.user.is_superuser:
            kwargs["queryset"] = ContextPolicy.objects.filter(
                models.Q(tenant_id__in=_tenant_ids(request)) | models.Q(tenant__isnull=True)
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    # --- reports: usage per tenant, job status ---------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("usage/", wrap(self.usage_index_view), name="chatplatform_tenant_usage_index"),
            path("jobs/", wrap(self.jobs_view), name="chatplatform_tenant_jobs"),
            path(
                "<path:object_id>/usage/",
                wrap(self.usage_view),
                name="chatplatform_tenant_usage",
            ),
            path(
                "<path:object_id>/exports/",
                wrap(self.exports_view),
                name="chatplatform_tenant_exports",
            ),
            *super().get_urls(),
        ]

    def _report_context(self, request: HttpRequest, title: str) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.opts,
            "has_view_permission": True,
        }

    def usage_index_view(self, request: HttpRequest) -> HttpResponse:
        """The usage pages of the admin's tenants (straight to it when there is one)."""
        if not self.has_module_permission(request):
            raise Http404
        tenants = list(self.get_queryset(request))
        if len(tenants) == 1:
            return HttpResponseRedirect(
                reverse("admin:chatplatform_tenant_usage", args=[tenants[0].pk])
            )
        context = {**self._report_context(request, "Usage"), "tenants": tenants}
        return TemplateResponse(request, "admin/chatplatform/tenant/usage_index.html", context)

    def usage_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Tokens, cost and savings over time for one tenant, and the estimator's calibration
        per model."""
        tenant = self.get_object(request, unquote(object_id))
        if tenant is None or not self.has_view_permission(request, tenant):
            raise Http404("No such tenant.")
        try:
            days = int(request.GET.get("days", "30"))
        except ValueError:
            days = 30
        report = usage_report(tenant, days=days)
        context = {
            **self._report_context(request, f"Usage of {tenant.name}"),
            "original": tenant,
            "tenant": tenant,
            "report": report,
            "days": len(report.days),
            "day_choices": (7, 30, 90, 365),
            "chart_data": report.chart_data(),
            "calibrations": calibrations(report.profiles),
        }
        return TemplateResponse(request, "admin/chatplatform/tenant/usage.html", context)

    def exports_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Export the whole tenant's conversations (``console.exports``)."""
        return tenant_exports_view(self, request, self.get_object(request, unquote(object_id)))

    def jobs_view(self, request: HttpRequest) -> HttpResponse:
        """Backfill and summary jobs, and API keys created and revoked, for the admin's
        tenants."""
        if not self.has_module_permission(request):
            raise Http404
        tenants = list(self.get_queryset(request))
        context = {**self._report_context(request, "Background jobs"), **job_status(tenants)}
        return TemplateResponse(request, "admin/chatplatform/tenant/jobs.html", context)

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        # The form's clean (Tenant.clean) refused another tenant's policy; this re-checks.
        if not obj.may_activate(obj.active_policy):
            raise PermissionDenied("A tenant can only activate its own policies or presets.")
        super().save_model(request, obj, form, change)


@admin.register(Membership)
class MembershipAdmin(SpendUsedMixin, TenantScopedAdmin):
    """Memberships; the staff flag (the admin log-in) follows the admin role. A member's
    monthly spending limit is set here."""

    list_display = ("user", "tenant", "role", "spend_hard_usd", "created_at")
    list_filter = ("role",)
    search_fields = ("user__username", "user__email")
    fields = ("tenant", "user", "role", *SPEND_LIMIT_FIELDS, "used_this_month")
    readonly_fields = ("used_this_month",)
    spender = MEMBER

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        previous_user_id = form.initial.get("user") if change else None
        super().save_model(request, obj, form, change)
        user_sync_staff(obj.user)
        if previous_user_id is not None and previous_user_id != obj.user_id:
            user_sync_staff(get_user_model().objects.get(pk=previous_user_id))

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        if not self._owns(request, obj):
            raise PermissionDenied
        membership_remove(membership=obj)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        if not request.user.is_superuser:
            queryset = queryset.filter(tenant_id__in=_tenant_ids(request))
        for membership in queryset.select_related("user"):
            membership_remove(membership=membership)


class ApiKeyStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(SpendUsedMixin, TenantScopedAdmin):
    spender = API_KEY
    list_filter = (ApiKeyStatusFilter, "role")
    list_display = (
        "name",
        "prefix",
        "tenant",
        "user",
        "role",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at", "used_this_month")
    fields = (
        "tenant",
        "name",
        "user",
        "role",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
        *SPEND_LIMIT_FIELDS,
        "used_this_month",
    )
    actions = ("revoke",)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        raw_key = None
        if not change:
            raw_key, obj.prefix, obj.key_hash = ApiKey.generate()
        super().save_model(request, obj, form, change)
        if raw_key:
            messages.warning(
                request,
                f"New API key (shown once, copy it now): {raw_key}",
            )

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        if not request.user.is_superuser:
            queryset = queryset.filter(tenant_id__in=_tenant_ids(request))
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            api_key_revoke(key=key)
            audit_record(
                AuditAction.CHANGED, request=request, target=key, changes={"revoked": [False, True]}
            )
        self.message_user(request, f"Revoked {len(keys)} key(s).")


@admin.register(ModelProfile)
class ModelProfileAdmin(ModelCatalogActionMixin, TenantScopedAdmin):
    list_display = (
        "name",
        "provider",
        "model",
        "is_active",
        "context_window",
        "max_output_tokens",
        "long_context_threshold_tokens",
        "prices_unknown",
        "tokenizer",
        "calibration",
    )
    list_filter = ("provider", "is_active", "prices_unknown")
    actions = ("update_from_provider",)
    form = ModelProfileForm
    readonly_fields = ("api_key_status", "calibration")

    @admin.display(description="Own API key")
    def api_key_status(self, obj: ModelProfile) -> str:
        return "set (not shown)" if obj.has_own_api_key else "not set"

    @method_decorator(sensitive_post_parameters("api_key"))  # kept out of error reports
    def changeform_view(self, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(*args, **kwargs)

    @admin.display(description="Calibration (real / estimated prompt tokens)")
    def calibration(self, obj: ModelProfile) -> str:
        if not obj.calibration_samples:
            return "no samples yet"
        variance = obj.calibration_ratio_m2 / max(obj.calibration_samples - 1, 1)
        return (
            f"{obj.calibration_ratio_mean:.3f} ± {variance**0.5:.3f} "
            f"over {obj.calibration_samples} turns"
        )
