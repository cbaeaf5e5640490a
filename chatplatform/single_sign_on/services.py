"""Who a provider's sign-on logs in, and the tenant's provider a log-in starts with.

Just-in-time membership: an unknown address gets a user (no usable password) and a
membership of the provider's tenant with its default role; a known user gets the membership
if they have none there; an existing membership keeps its role. Only the tenant whose provider
vouched for the address is ever joined. A provider never logs in the operator's accounts
(superusers) nor an administrator's account that is not already a member of its tenant.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from chatplatform.audit import audit_record
from chatplatform.models import AuditAction, IdentityProvider, Membership, Tenant
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

from .protocol import SignOnRefused, VouchedIdentity


def identity_provider_for_tenant(slug: str) -> IdentityProvider | None:
    """The enabled provider of the active tenant ``slug``; None for an unknown tenant, one
    without single sign-on or with it switched off (the same answer for all three)."""
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
    if tenant is None:
        return None
    with tenant_scope(tenant):
        return IdentityProvider.objects.filter(enabled=True).select_related("tenant").first()


def identity_provider_for_email(email: str) -> IdentityProvider | None:
    """The enabled provider of an active tenant that serves ``email``'s domain; None when no
    tenant does (or the address is not one)."""
    _, at, domain = email.strip().lower().rpartition("@")
    if not at or not domain:
        return None
    with all_tenants():  # resolving the tenant from outside it, as a log-in does
        providers = IdentityProvider.objects.filter(
            enabled=True, tenant__is_active=True
        ).select_related("tenant")
        for provider in providers:
            if domain in provider.domains:
                return provider
    return None


def sign_on_member(
    *, provider: IdentityProvider, identity: VouchedIdentity
) -> tuple[Any, Membership]:
    """The user the provider vouched for, a member of the provider's tenant (created when
    new). Raises :class:`SignOnRefused` for an account this provider may not log in."""
    user_model = get_user_model()
    tenant_id = provider.tenant_id
    with transaction.atomic():
        users = list(user_model.objects.filter(email__iexact=identity.email)[:2])
        if len(users) > 1:
            raise SignOnRefused(
                "Several accounts have this e-mail address; log in with your password.",
                code="email_ambiguous",
            )
        with tenant_scope(tenant_id):
            if users:
                user = users[0]
                membership = Membership.objects.filter(user=user).first()
                _check_existing(user, is_member=membership is not None)
            else:
                if user_model.objects.filter(username__iexact=identity.email).exists():
                    raise SignOnRefused(
                        "An account with this name exists; log in with your password.",
                        code="username_taken",
                    )
                user = user_model.objects.create_user(
                    username=identity.email, email=identity.email, password=None
                )
                membership = None
            if membership is None:
                membership = Membership.objects.create(
                    tenant_id=tenant_id, user=user, role=provider.default_role
                )
                audit_record(
                    AuditAction.CREATED,
                    actor=user,
                    target=membership,
                    changes={
                        "role": [None, membership.role],
                        "joined by": [None, "single sign-on"],
                    },
                )
    return user, membership


def _check_existing(user: Any, *, is_member: bool) -> None:
    if not user.is_active:
        raise SignOnRefused("This account is deactivated.", code="user_inactive")
    if user.is_superuser or (user.is_staff and not is_member):
        raise SignOnRefused(
            "This account logs in with its password, not with single sign-on.",
            code="account_not_for_sso",
        )


def sign_on_failed_record(
    request: Any, *, provider: IdentityProvider | None, code: str, email: str = ""
) -> None:
    """A refused single sign-on: a log-in failure of the provider's tenant in the audit log."""
    audit_record(
        AuditAction.LOGIN_FAILED,
        request=request,
        actor_label=email,
        tenant_id=provider.tenant_id if provider is not None else None,
        target=provider,
        changes={"single sign-on": [None, code]},
    )


def endpoint_refused_record(request: Any, *, provider: IdentityProvider, reason: str) -> None:
    """A call to the provider refused by the operator's rules: a security event."""
    audit_record(
        AuditAction.ENDPOINT_REFUSED,
        request=request,
        target=provider,
        changes={"endpoint": [None, provider.issuer], "reason": [None, reason]},
    )
