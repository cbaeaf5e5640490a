"""Tenants, who belongs to them, and the API keys integrations use."""

from __future__ import annotations

import hashlib
import secrets
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from chatplatform.models.spending import MonthlyLimitFields
from chatplatform.tenancy.scoping import TenantOwnedModel

API_KEY_PREFIX = "cpk"


def time_zone_validate(value: str) -> None:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"{value!r} is not a time zone name (e.g. Europe/Paris).") from None


class Tenant(MonthlyLimitFields):
    """An organisation. Everything a user creates belongs to exactly one tenant."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    is_active = models.BooleanField(default=True)
    active_policy = models.ForeignKey(
        "chatplatform.ContextPolicy",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The context policy every new turn of this tenant uses (its own or a preset).",
    )
    service_user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="service_tenant",
        help_text="The user that API keys without a member user act as.",
    )
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Delete conversations nobody has written in for this many days (their "
        "messages, images, summaries and vectors; the cost figures of their turns stay in the "
        "usage reports). Empty: keep conversations until they are deleted.",
    )
    time_zone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[time_zone_validate],
        help_text="The tenant's time zone (IANA name, e.g. Europe/Paris): its spending months "
        "start at midnight there.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def may_activate(self, policy: models.Model | None) -> bool:
        """A tenant's active policy is one of its own policies or a preset (no tenant)."""
        return policy is None or getattr(policy, "tenant_id", None) in (None, self.pk)

    def clean(self) -> None:
        super().clean()
        if not self.may_activate(self.active_policy):
            raise ValidationError(
                {"active_policy": "Choose one of this tenant's own policies or a preset."}
            )


class MembershipRole(models.TextChoices):
    MEMBER = "member", "Member"
    ADMIN = "admin", "Admin"


class Membership(TenantOwnedModel, MonthlyLimitFields):
    """A user's role in a tenant; a user may belong to several tenants."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(
        max_length=16, choices=MembershipRole.choices, default=MembershipRole.MEMBER
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_user"),
        ]
        indexes = [models.Index(fields=["user", "tenant"], name="membership_user_idx")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant_id} ({self.role})"


def hash_api_key(raw_key: str) -> str:
    """SHA-256 of the whole key. Keys carry 256 random bits, so a fast hash is sufficient."""
    return hashlib.sha256(raw_key.encode()).hexdigest()


class ApiKey(TenantOwnedModel, MonthlyLimitFields):
    """A tenant API key: stored hashed, shown once, revocable.

    A key acts for ``user`` (a member of the tenant) or, when empty, for the tenant's service
    user. ``role`` admin lets the key manage any user's facts within its tenant.
    """

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="Shown to identify the key; not secret.")
    key_hash = models.CharField(max_length=64)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="api_keys",
        help_text="The member this key acts for; empty: the tenant's service user.",
    )
    role = models.CharField(
        max_length=16, choices=MembershipRole.choices, default=MembershipRole.MEMBER
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    #: The client addresses the key was used from (newest last, at most
    #: ``KEY_ADDRESSES_KEPT``): a use from any other is an audit event.
    seen_addresses = models.JSONField(default=list, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "key_hash"], name="apikey_unique_hash"),
        ]
        indexes = [models.Index(fields=["key_hash"], name="apikey_hash_idx")]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @staticmethod
    def generate() -> tuple[str, str, str]:
        """Return ``(raw_key, prefix, key_hash)`` for a new key; only the hash is stored."""
        prefix = secrets.token_hex(4)
        raw_key = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
        return raw_key, prefix, hash_api_key(raw_key)
