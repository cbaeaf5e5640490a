"""Invitations in the admin: a tenant admin invites people to their tenant (by e-mail, or by a
link shown once to copy) and revokes invitations; they see only their tenants' invitations."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models, router
from django.http import HttpRequest
from django.utils.html import format_html

from chatplatform.admin_base import TenantScopedAdmin, _tenant_ids
from chatplatform.audit import audit_record
from chatplatform.django_internals import instance_mark_saved
from chatplatform.invitations import InvitationNotAllowed, invitation_create, invitation_revoke
from chatplatform.models import AuditAction, Invitation


class InvitationStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("pending", "Waiting"), ("accepted", "Accepted"), ("revoked", "Revoked")]

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        if self.value() == "pending":
            return queryset.filter(accepted_at__isnull=True, revoked_at__isnull=True)
        if self.value() == "accepted":
            return queryset.filter(accepted_at__isnull=False)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(Invitation)
class InvitationAdmin(TenantScopedAdmin):
    list_display = ("__str__", "tenant", "role", "status_label", "invited_by", "expires_at")
    list_filter = (InvitationStatusFilter, "role")
    search_fields = ("email",)
    fields = ("tenant", "email", "role")
    readonly_fields = (
        "status_label",
        "invited_by",
        "created_at",
        "expires_at",
        "accepted_by",
        "accepted_at",
        "revoked_at",
    )
    actions = ("revoke",)

    class Media:
        css = {"all": ("admin-extras/admin-extras.css",)}
        js = ("admin-extras/invitation-link.js",)

    @admin.display(description="Status")
    def status_label(self, obj: Invitation) -> str:
        return obj.get_status_display() if obj.pk else ""

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # An invitation is not edited once sent: revoke it and invite again.
        if obj is not None:
            return False
        return super().has_change_permission(request, obj)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return self.fields
        return (*self.fields, *self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ()
        return (*self.fields, *self.readonly_fields)

    def save_model(
        self, request: HttpRequest, obj: Invitation, form: forms.ModelForm, change: bool
    ) -> None:
        if change:
            raise PermissionDenied("An invitation cannot be changed; revoke it instead.")
        if not self._owns(request, obj):
            raise PermissionDenied("You can only invite people to the tenants you administer.")
        try:
            invitation, link = invitation_create(
                tenant=obj.tenant,
                invited_by=request.user,
                role=obj.role,
                email=obj.email,
                base_url=request.build_absolute_uri("/"),
            )
        except InvitationNotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        for field in Invitation._meta.concrete_fields:
            setattr(obj, field.attname, getattr(invitation, field.attname))
        instance_mark_saved(obj, router.db_for_write(Invitation))
        sent = f" and e-mailed to {obj.email}" if obj.email else ""
        messages.warning(
            request,
            format_html(
                "Invitation created{}. Its link is shown only now, copy it: "
                '<input type="text" readonly class="vTextField invitation-link" '
                'id="invitation-link" aria-label="Invitation link" value="{}"> '
                '<button type="button" class="button invitation-copy" '
                'data-copy-target="invitation-link">Copy</button>',
                sent,
                link,
            ),
        )

    @admin.action(description="Revoke the selected invitations")
    def revoke(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        if not request.user.is_superuser:
            queryset = queryset.filter(tenant_id__in=_tenant_ids(request))
        revoked = 0
        for invitation in queryset:
            if invitation_revoke(invitation=invitation):
                revoked += 1
                audit_record(
                    AuditAction.CHANGED,
                    request=request,
                    target=invitation,
                    changes={"revoked": [False, True]},
                )
        self.message_user(request, f"Revoked {revoked} invitation(s).")
