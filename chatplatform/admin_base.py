"""One ModelAdmin base for every tenant-owned model.

Superusers see everything. A tenant admin (staff user with an admin membership) sees and edits
only the objects of the tenants they administer: the querysets (the tenant scope activated by
the middleware, plus an explicit filter here), foreign-key choices, inlines, actions and saves.
Shared rows (presets with no tenant) are visible to tenant admins but read-only.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist, PermissionDenied, ValidationError
from django.db import models
from django.http import HttpRequest

from chatplatform.audit import audit_record, field_changes
from chatplatform.models import AuditAction, Tenant
from chatplatform.selectors import administered_tenant_ids, tenants_for_admin


def _has_tenant_field(model: type[models.Model]) -> bool:
    try:
        model._meta.get_field("tenant")
    except FieldDoesNotExist:
        return False
    return True


def _tenant_ids(request: HttpRequest) -> list[int]:
    cached = getattr(request, "_administered_tenant_ids", None)
    if cached is None:
        cached = administered_tenant_ids(request.user)
        request._administered_tenant_ids = cached  # type: ignore[attr-defined]
    return cached


class TenantScopedFormMixin:
    """Validates that every related object belongs to the object's tenant."""

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        tenant = cleaned.get("tenant", getattr(self.instance, "tenant", None))  # type: ignore[attr-defined]
        tenant_id = getattr(tenant, "pk", None)
        for name, value in cleaned.items():
            if name == "tenant" or not isinstance(value, models.Model):
                continue
            related_tenant = getattr(value, "tenant_id", None)
            if related_tenant is not None and tenant_id is not None and related_tenant != tenant_id:
                raise ValidationError({name: "This object belongs to another tenant."})
        return cleaned


class TenantScopedAdminMixin:
    """Shared by ModelAdmin and inlines."""

    model: type[models.Model]

    def _is_superuser(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        if self._is_superuser(request):
            return queryset
        ids = _tenant_ids(request)
        field = self.model._meta.get_field("tenant")
        if getattr(field, "null", False):
            return queryset.filter(models.Q(tenant_id__in=ids) | models.Q(tenant__isnull=True))
        return queryset.filter(tenant_id__in=ids)

    def _owns(self, request: HttpRequest, obj: Any) -> bool:
        if obj is None or self._is_superuser(request):
            return True
        return obj.tenant_id is not None and obj.tenant_id in _tenant_ids(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._is_superuser(request) or bool(_tenant_ids(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self._is_superuser(request):
            return True
        if not _tenant_ids(request):
            return False
        return obj is None or obj.tenant_id is None or obj.tenant_id in _tenant_ids(request)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._is_superuser(request) or bool(_tenant_ids(request))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(_tenant_ids(request) or self._is_superuser(request)) and self._owns(
            request, obj
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request, obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if not self._is_superuser(request):
            related = db_field.related_model
            ids = _tenant_ids(request)
            if related is Tenant:
                kwargs["queryset"] = tenants_for_admin(request.user)
            elif related is get_user_model():
                kwargs["queryset"] = (
                    get_user_model().objects.filter(memberships__tenant_id__in=ids).distinct()
                )
            elif _has_tenant_field(related):
                tenant_field = related._meta.get_field("tenant")
                condition = models.Q(tenant_id__in=ids)
                if getattr(tenant_field, "null", False):
                    condition |= models.Q(tenant__isnull=True)
                kwargs["queryset"] = related._default_manager.filter(condition)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if not self._is_superuser(request) and db_field.related_model is get_user_model():
            kwargs["queryset"] = (
                get_user_model()
                .objects.filter(memberships__tenant_id__in=_tenant_ids(request))
                .distinct()
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]


def _before(form: forms.BaseForm, field: str) -> Any:
    """A changed field's value as the form was shown (a related object, not its id)."""
    initial = form.initial.get(field)
    to_python = getattr(form.fields.get(field), "to_python", None)
    if isinstance(form.fields.get(field), forms.ModelChoiceField) and callable(to_python):
        try:
            return to_python(initial)
        except ValidationError:
            return initial
    return initial


def _form_changes(form: forms.BaseForm, formsets: Any, add: bool) -> dict[str, list[Any]]:
    # A new object: every field it was created with a value for; a change: the fields changed.
    if add:
        changed = [name for name, value in form.cleaned_data.items() if value not in (None, "")]
    else:
        changed = form.changed_data
    changes = field_changes(
        changed,
        {} if add else {field: _before(form, field) for field in changed},
        {field: form.cleaned_data.get(field) for field in changed},
    )
    for formset in formsets or ():
        label = str(formset.model._meta.verbose_name)
        for obj in getattr(formset, "new_objects", ()):
            changes[f"{label} {obj}"] = [None, "added"]
        for obj, fields in getattr(formset, "changed_objects", ()):
            changes[f"{label} {obj}"] = ["", f"changed: {', '.join(fields)}"]
        for obj in getattr(formset, "deleted_objects", ()):
            changes[f"{label} {obj}"] = [str(obj), "deleted"]
    return changes


class AuditedAdminMixin:
    """Every add, change and delete made through this admin goes to the audit log
    (:mod:`chatplatform.audit`), with the changed fields' values before and after, inside the
    admin's own transaction. Uses the admin's public logging hooks, which it calls after a
    save and before a delete."""

    def construct_change_message(
        self, request: HttpRequest, form: Any, formsets: Any, add: bool = False
    ) -> Any:
        request._audit_changes = _form_changes(form, formsets, add)  # type: ignore[attr-defined]
        return super().construct_change_message(request, form, formsets, add)  # type: ignore[misc]

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        changes = getattr(request, "_audit_changes", {})
        audit_record(AuditAction.CREATED, request=request, target=obj, changes=changes)
        return super().log_addition(request, obj, message)  # type: ignore[misc]

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        changes = getattr(request, "_audit_changes", {})
        audit_record(AuditAction.CHANGED, request=request, target=obj, changes=changes)
        return super().log_change(request, obj, message)  # type: ignore[misc]

    def log_deletions(self, request: HttpRequest, queryset: Any) -> Any:
        for obj in queryset:
            audit_record(AuditAction.DELETED, request=request, target=obj)
        return super().log_deletions(request, queryset)  # type: ignore[misc]


class TenantScopedAdmin(AuditedAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    """Base ModelAdmin for tenant-owned models."""

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        form = super().get_form(request, obj, change=change, **kwargs)
        if not issubclass(form, TenantScopedFormMixin):
            form = type(form.__name__, (TenantScopedFormMixin, form), {})
        if not self._is_superuser(request) and "tenant" in form.base_fields:
            ids = _tenant_ids(request)
            field = form.base_fields["tenant"]
            field.required = True
            if len(ids) == 1 and obj is None:
                field.initial = ids[0]
        return form

    def save_model(
        self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool
    ) -> None:
        if not self._is_superuser(request):
            if obj.tenant_id is None or obj.tenant_id not in _tenant_ids(request):
                raise PermissionDenied("You can only save objects of the tenants you administer.")
        super().save_model(request, obj, form, change)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        """Inline rows inherit the parent's tenant; a row of another tenant is refused."""
        parent_tenant_id = getattr(form.instance, "tenant_id", None)
        for instance in formset.save(commit=False):
            if _has_tenant_field(type(instance)):
                if instance.tenant_id is None:
                    instance.tenant_id = parent_tenant_id
                if instance.tenant_id != parent_tenant_id:
                    raise PermissionDenied("Inline objects must belong to the parent's tenant.")
            instance.save()
        for deleted in formset.deleted_objects:
            deleted.delete()
        formset.save_m2m()

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        if not self._owns(request, obj):
            raise PermissionDenied
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        # get_queryset already narrowed the changelist; re-filter in case an action passes more.
        if not self._is_superuser(request):
            queryset = queryset.filter(tenant_id__in=_tenant_ids(request))
        super().delete_queryset(request, queryset)


class TenantScopedInline(TenantScopedAdminMixin, admin.TabularInline):
    extra = 0

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._owns(request, obj) and super().has_add_permission(request, obj)
