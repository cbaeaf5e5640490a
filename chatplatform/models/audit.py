"""The audit log: who changed what in the administration, and the security events, with
when and from where. Rows are written by :mod:`chatplatform.audit` and never changed."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from chatplatform.tenancy.scoping import TenantScopedManager


class AuditAction(models.TextChoices):
    CREATED = "created", "Created"
    CHANGED = "changed", "Changed"
    DELETED = "deleted", "Deleted"
    LOGIN_FAILED = "login_failed", "Log-in failed"
    LOCKED_OUT = "locked_out", "Locked out"
    KEY_NEW_ADDRESS = "key_new_address", "API key used from a new address"
    ENDPOINT_REFUSED = "endpoint_refused", "Endpoint refused"
    ACCOUNT_DELETED = "account_deleted", "Account deleted by its user"
    TENANT_EXPORTED = "tenant_exported", "Tenant's conversations exported"


class AuditEvent(models.Model):
    """One administrative change or security event. ``changes`` is ``{field: [before,
    after]}`` (secrets shown only as changed); ``tenant`` is the tenant it concerns (empty
    for the platform's own, such as a log-in failure), ``actor_label`` who it was at the
    time (kept when the user is gone)."""

    tenant = models.ForeignKey(
        "chatplatform.Tenant", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_label = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=24, choices=AuditAction.choices)
    target_type = models.CharField(max_length=100, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=200, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantScopedManager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="audit_tenant_idx")]

    def __str__(self) -> str:
        return f"{self.actor_label or 'someone'} {self.action} {self.target_label}".strip()
