"""Authenticating tenant API keys (shared by the REST API and the WebSocket consumer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from chatplatform.audit import audit_record
from chatplatform.models import ApiKey, AuditAction, Membership, Tenant
from chatplatform.models.tenants import API_KEY_PREFIX, hash_api_key
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

#: last_used_at is written at most this often per key (seconds), not on every request.
LAST_USED_RESOLUTION = 60
#: How many of a key's client addresses are remembered (a use from another is audited).
KEY_ADDRESSES_KEPT = 20


@dataclass(frozen=True)
class KeyPrincipal:
    """Who a request with an API key acts as: ``user`` within ``tenant``; ``is_admin`` keys
    may manage every user's facts within the tenant."""

    key: ApiKey
    tenant: Tenant
    user: Any
    is_admin: bool


def authenticate_api_key(raw_key: str, client_address: str | None = None) -> KeyPrincipal | None:
    """The principal of an active key, or None for anything else (unknown, revoked, malformed,
    or a user who is no longer a member). The lookup goes by hash, across tenants, since the
    key is what names the tenant. A use from a ``client_address`` the key was not used from
    before is recorded in the audit log."""
    if not raw_key or not raw_key.startswith(API_KEY_PREFIX + "_") or len(raw_key) > 200:
        return None
    with all_tenants():
        key = (
            ApiKey.objects.select_related("tenant", "user", "tenant__service_user")
            .filter(key_hash=hash_api_key(raw_key), revoked_at__isnull=True)
            .first()
        )
    if key is None or not key.tenant.is_active:
        return None
    user = key.user or key.tenant.service_user
    if user is None or not user.is_active:
        return None
    with tenant_scope(key.tenant_id):
        if not Membership.objects.filter(user=user).exists():
            return None
        now = timezone.now()
        if (
            key.last_used_at is None
            or (now - key.last_used_at).total_seconds() > LAST_USED_RESOLUTION
        ):
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        if client_address is not None and client_address not in key.seen_addresses:
            _new_address(key, user, client_address)
    return KeyPrincipal(key=key, tenant=key.tenant, user=user, is_admin=key.role == "admin")


def _new_address(key: ApiKey, user: Any, address: str) -> None:
    """Remember ``address`` for ``key`` and record its use from there (in the key's tenant
    scope)."""
    seen = [*key.seen_addresses, address][-KEY_ADDRESSES_KEPT:]
    ApiKey.objects.filter(pk=key.pk).update(seen_addresses=seen)
    audit_record(
        AuditAction.KEY_NEW_ADDRESS,
        actor=user,
        target=key,
        address=address,
        changes={"address": [None, address], "known": [len(key.seen_addresses), len(seen)]},
    )
