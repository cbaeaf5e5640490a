"""Invitations: a tenant admin invites someone to the tenant by e-mail or by link."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from chatplatform.tenancy.scoping import TenantOwnedModel

from .tenants import MembershipRole


def hash_invitation_token(raw_token: str) -> str:
    """SHA-256 of the token. Tokens carry 256 random bits, so a fast hash is sufficient."""
    return hashlib.sha256(raw_token.encode()).hexdigest()


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Waiting to be accepted"
    ACCEPTED = "accepted", "Accepted"
    REVOKED = "revoked", "Revoked"
    EXPIRED = "expired", "Expired"


class Invitation(TenantOwnedModel):
    """An invitation to join a tenant with a role. Its link carries a random token that is
    stored only hashed, works once and expires."""

    email = models.EmailField(
        blank=True,
        help_text="Where to send the invitation. Leave empty to share the link yourself.",
    )
    role = models.CharField(
        max_length=16,
        choices=MembershipRole.choices,
        default=MembershipRole.MEMBER,
        help_text="Admins can also change the tenant's settings and invite people.",
    )
    token_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(editable=False)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
    )
    accepted_at = models.DateTimeField(null=True, blank=True, editable=False)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "token_hash"], name="invitation_unique_token"
            ),
        ]
        indexes = [
            models.Index(fields=["token_hash"], name="invitation_token_idx"),
            models.Index(fields=["tenant", "-created_at"], name="invitation_tenant_idx"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Invitation of {self.email or 'a link holder'} as {self.get_role_display()}"

    @staticmethod
    def generate() -> tuple[str, str]:
        """``(raw_token, token_hash)`` for a new invitation; only the hash is stored."""
        raw_token = secrets.token_urlsafe(32)
        return raw_token, hash_invitation_token(raw_token)

    def get_status_display(self) -> str:
        return InvitationStatus(self.status).label

    @property
    def status(self) -> str:
        if self.accepted_at is not None:
            return InvitationStatus.ACCEPTED
        if self.revoked_at is not None:
            return InvitationStatus.REVOKED
        if self.expires_at <= timezone.now():
            return InvitationStatus.EXPIRED
        return InvitationStatus.PENDING
