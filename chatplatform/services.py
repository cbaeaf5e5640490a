"""Writes of the platform core: tenants, members, API keys, copies of context policies."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from chatplatform.models import ApiKey, ContextPolicy, Membership, MembershipRole, Tenant
from chatplatform.policies import DEFAULT_PRESET
from chatplatform.tenancy.scoping import all_tenants, tenant_scope


@transaction.atomic
def tenant_create(
    *, name: str, slug: str | None = None, policy_name: str = DEFAULT_PRESET
) -> Tenant:
    """Create a tenant with its service user and the named preset as its active policy."""
    slug = slug or slugify(name)[:64]
    with all_tenants():
        preset = ContextPolicy.objects.filter(tenant__isnull=True, name=policy_name).first()
    User = get_user_model()
    service_user = User.objects.create_user(
        username=f"service-{slug}"[:150], password=None, first_name=name, last_name="(service)"
    )
    tenant = Tenant.objects.create(
        name=name, slug=slug, active_policy=preset, service_user=service_user
    )
    with tenant_scope(tenant):
        Membership.objects.create(tenant=tenant, user=service_user, role=MembershipRole.MEMBER)
    return tenant


class PolicyNotAllowed(ValueError):
    """The policy belongs to another tenant: a tenant activates its own policies or presets."""


def tenant_set_active_policy(*, tenant: Tenant, policy: ContextPolicy | None) -> None:
    """Make ``policy`` the one every new turn of ``tenant`` uses (None: the Hybrid preset).

    Saving the tenant clears this process's cached policies at once (the cache listens to
    tenant saves); other processes follow within seconds."""
    if not tenant.may_activate(policy):
        raise PolicyNotAllowed(f"{policy} belongs to another tenant.")
    tenant.active_policy = policy
    tenant.save(update_fields=["active_policy"])


#: What a copy of a policy does not take over: its owner, its name and its times.
_NOT_COPIED = frozenset({"id", "tenant", "name", "created_at", "updated_at"})
#: Room kept at the end of a copied name for " (copy 99)".
_COPY_SUFFIX_ROOM = 12


def policy_settings(policy: ContextPolicy) -> dict[str, Any]:
    """Every setting of ``policy`` by field name (the model profile as its id), without its
    owner, name and times: what a copy, or the admin's form for a new policy, starts from."""
    return {
        field.name: field.value_from_object(policy)
        for field in ContextPolicy._meta.concrete_fields
        if field.name not in _NOT_COPIED
    }


def _copy_name(name: str, tenant: Tenant) -> str:
    """``"<name> (copy)"``, numbered when the tenant already has a policy of that name."""
    max_length = getattr(ContextPolicy._meta.get_field("name"), "max_length", None) or 100
    base = name[: max_length - _COPY_SUFFIX_ROOM]
    taken = set(
        ContextPolicy.objects.filter(tenant=tenant, name__startswith=base).values_list(
            "name", flat=True
        )
    )
    candidate, number = f"{base} (copy)", 2
    while candidate in taken:
        candidate, number = f"{base} (copy {number})", number + 1
    return candidate


@transaction.atomic
def policy_copy(*, policy: ContextPolicy, tenant: Tenant) -> ContextPolicy:
    """A new policy of ``tenant`` with every setting of ``policy`` (a preset, or one of the
    tenant's own), named "<name> (copy)": a tenant tunes a copy, since presets are shared.
    The copy is validated like a policy saved in the admin (ValidationError)."""
    if policy.tenant_id is not None and policy.tenant_id != tenant.pk:
        raise PolicyNotAllowed(f"{policy} belongs to another tenant.")
    values = {
        field.attname: getattr(policy, field.attname)
        for field in ContextPolicy._meta.concrete_fields
        if field.name not in _NOT_COPIED
    }
    with tenant_scope(tenant):
        copy = ContextPolicy(tenant=tenant, name=_copy_name(policy.name, tenant), **values)
        copy.full_clean()
        copy.save()
    return copy


def membership_add(*, tenant: Tenant, user: Any, role: str = MembershipRole.MEMBER) -> Membership:
    """Add ``user`` to ``tenant`` (or change their role); the staff flag follows the role."""
    with tenant_scope(tenant):
        membership, _ = Membership.objects.update_or_create(
            tenant=tenant, user=user, defaults={"role": role}
        )
    user_sync_staff(user)
    return membership


def membership_remove(*, membership: Membership) -> None:
    """Remove a membership; a user who administers no tenant any more loses the staff flag."""
    user = membership.user
    with tenant_scope(membership.tenant_id):
        Membership.objects.filter(pk=membership.pk).delete()
    user_sync_staff(user)


def user_sync_staff(user: Any) -> None:
    """The staff flag (the admin log-in) follows the admin role: set while the user is an
    admin of some tenant, cleared when they are not, kept for superusers."""
    with all_tenants():
        is_admin = Membership.objects.filter(user_id=user.pk, role=MembershipRole.ADMIN).exists()
    staff = bool(user.is_superuser or is_admin)
    if user.is_staff != staff:
        user.is_staff = staff
        user.save(update_fields=["is_staff"])


def api_key_create(
    *, tenant: Tenant, name: str, user: Any = None, role: str = MembershipRole.MEMBER
) -> tuple[ApiKey, str]:
    """Create a key; return it with the raw secret, which is never stored and shown only once."""
    raw_key, prefix, key_hash = ApiKey.generate()
    with tenant_scope(tenant):
        key = ApiKey.objects.create(
            tenant=tenant, name=name, user=user, role=role, prefix=prefix, key_hash=key_hash
        )
    return key, raw_key


def api_key_revoke(*, key: ApiKey) -> None:
    """Revoke ``key`` (a revoked key keeps the time it was first revoked). The key is saved,
    not updated in bulk, so that its ``post_save`` reaches whatever ends the key's open
    WebSockets."""
    with tenant_scope(key.tenant_id):
        current = ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).first()
        if current is None:
            return
        current.revoked_at = timezone.now()
        current.save(update_fields=["revoked_at"])
    key.revoked_at = current.revoked_at


def random_password() -> str:
    return secrets.token_urlsafe(12)
