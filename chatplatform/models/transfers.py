"""Conversations moved in and out: one row per import or export the user (or the tenant's
admin) asked for, run as a background job that reports its progress here."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from chatplatform.tenancy.scoping import TenantOwnedModel


class TransferKind(models.TextChoices):
    IMPORT = "import", "Import"
    EXPORT = "export", "Export of the user's conversations"
    TENANT_EXPORT = "tenant_export", "Export of the tenant's conversations"


class TransferFormat(models.TextChoices):
    CHATGPT = "chatgpt", "ChatGPT"
    CLAUDE = "claude", "Claude (also the platform's JSON export)"
    MARKDOWN = "markdown", "Markdown (a zip of one file per conversation)"


class TransferStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class Transfer(TenantOwnedModel):
    """An import or an export, and its job's progress (``done`` of ``total`` conversations).

    ``file``: the name, in the private transfer storage (``TRANSFER_ROOT``, never served
    publicly), of the uploaded file an import reads or of the file an export wrote; an
    export's file is downloaded through a signed link until ``expires_at``, then removed by the
    beat job. ``result``: an import's counts (``conversations``, ``messages``, ``skipped``),
    an export's (``conversations``, ``messages``, ``bytes``). ``user``: who asked (only they
    download a user export; a tenant export, any admin of the tenant)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", null=True
    )
    kind = models.CharField(max_length=16, choices=TransferKind.choices)
    format = models.CharField(max_length=16, choices=TransferFormat.choices)
    status = models.CharField(
        max_length=16, choices=TransferStatus.choices, default=TransferStatus.QUEUED
    )
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    file = models.CharField(max_length=300, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["tenant", "user", "-created_at"], name="transfer_user_idx"),
            models.Index(
                fields=["tenant", "expires_at"],
                condition=~models.Q(file=""),
                name="transfer_expiry_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.format}, {self.status})"
