"""Invitations to a tenant: create (and e-mail), accept, revoke.

The raw token is returned once by :func:`invitation_create` (for the link the admin copies and
the e-mail) and never stored: the table keeps its SHA-256. A token is single-use: acceptance
locks the invitation's row, so two acceptances of one link cannot both succeed.

An invitation with an e-mail address is for that address only: an existing account accepts it
only when its own address is the same (compared without regard to case); a new account made
from it gets that address. An invitation without an address is a link: whoever holds it may
accept it, once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from chatplatform.models import Invitation, InvitationStatus, Membership, MembershipRole, Tenant
from chatplatform.models.invitations import hash_invitation_token
from chatplatform.selectors import administered_tenant_ids
from chatplatform.services import membership_add
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

#: How a role ranks: accepting an invitation never lowers a member's role.
ROLE_RANK: dict[str, int] = {MembershipRole.MEMBER: 0, MembershipRole.ADMIN: 1}


class InvitationNotAllowed(PermissionError):
    """The inviter does not administer the tenant."""


#: Why an invitation cannot be used by this account: it was sent to another e-mail address.
OTHER_ADDRESS = "other_address"


class InvitationUnusable(Exception):
    """The link cannot be used; ``reason`` is an :class:`InvitationStatus` value,
    ``"unknown"`` for a token that names no invitation, or :data:`OTHER_ADDRESS` for an
    account whose e-mail address is not the one invited."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def invitation_link(raw_token: str, base_url: str) -> str:
    """The accept page's address for ``raw_token`` on the site at ``base_url``."""
    return base_url.rstrip("/") + reverse("invitation_accept", args=[raw_token])


def invitation_create(
    *,
    tenant: Tenant,
    invited_by: Any,
    base_url: str,
    role: str = MembershipRole.MEMBER,
    email: str = "",
    valid_days: int | None = None,
) -> tuple[Invitation, str]:
    """A new invitation to ``tenant`` and its link (shown once). ``invited_by`` must
    administer the tenant (or be a superuser). With ``email`` the link is e-mailed after
    commit."""
    if not (invited_by.is_superuser or tenant.pk in administered_tenant_ids(invited_by)):
        raise InvitationNotAllowed("Only the tenant's admins can invite people to it.")
    if role not in ROLE_RANK:
        raise ValueError(f"Unknown role: {role!r}")
    days = settings.INVITATION_VALID_DAYS if valid_days is None else valid_days
    raw_token, token_hash = Invitation.generate()
    email = email.strip()
    with tenant_scope(tenant):
        invitation = Invitation.objects.create(
            tenant=tenant,
            email=email,
            role=role,
            token_hash=token_hash,
            expires_at=timezone.now() + timedelta(days=days),
            invited_by=invited_by,
        )
    link = invitation_link(raw_token, base_url)
    if email:
        transaction.on_commit(lambda: _send(invitation, tenant, invited_by, link))
    return invitation, link


def _send(invitation: Invitation, tenant: Tenant, invited_by: Any, link: str) -> None:
    context = {
        "tenant": tenant,
        "inviter": invited_by.get_full_name() or invited_by.get_username(),
        "role": invitation.get_role_display().lower(),
        "link": link,
        "expires_at": invitation.expires_at,
    }
    subject = render_to_string("registration/invitation_subject.txt", context).strip()
    body = render_to_string("registration/invitation_email.txt", context)
    send_mail(subject, body, None, [invitation.email])


def invitation_by_token(raw_token: str) -> Invitation:
    """The invitation of a raw token, whichever its tenant; InvitationUnusable("unknown")
    when there is none."""
    if not raw_token or len(raw_token) > 100:
        raise InvitationUnusable("unknown")
    with all_tenants():
        invitation = (
            Invitation.objects.select_related("tenant")
            .filter(token_hash=hash_invitation_token(raw_token))
            .first()
        )
    if invitation is None or not invitation.tenant.is_active:
        raise InvitationUnusable("unknown")
    return invitation


def invitation_usable(raw_token: str) -> Invitation:
    """The pending invitation of ``raw_token``; InvitationUnusable (why) otherwise."""
    invitation = invitation_by_token(raw_token)
    if invitation.status != InvitationStatus.PENDING:
        raise InvitationUnusable(invitation.status)
    return invitation


def same_address(first: str, second: str) -> bool:
    """Whether two e-mail addresses are the same, whatever their case."""
    return bool(first.strip()) and first.strip().casefold() == second.strip().casefold()


def invitation_for(invitation: Invitation, user: Any) -> bool:
    """Whether ``user`` may accept ``invitation``: any account for a link, only the account
    with the invited address for an e-mail invitation."""
    return not invitation.email or same_address(invitation.email, user.email or "")


def invitation_accept(*, raw_token: str, user: Any) -> Membership:
    """``user`` joins the invitation's tenant with its role (a member's role is never
    lowered); the invitation is used up. InvitationUnusable when it cannot be used, also
    (:data:`OTHER_ADDRESS`) when it was sent to an address that is not ``user``'s."""
    with transaction.atomic():
        invitation = invitation_usable(raw_token)
        if not invitation_for(invitation, user):
            raise InvitationUnusable(OTHER_ADDRESS)
        with tenant_scope(invitation.tenant_id):
            # Locked and re-read: of two acceptances of one link, the second sees it used.
            invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
            if invitation.status != InvitationStatus.PENDING:
                raise InvitationUnusable(invitation.status)
            current = Membership.objects.filter(
                tenant_id=invitation.tenant_id, user_id=user.pk
            ).first()
            invitation.accepted_at = timezone.now()
            invitation.accepted_by = user
            invitation.save(update_fields=["accepted_at", "accepted_by"])
        if current is not None and ROLE_RANK[current.role] >= ROLE_RANK[invitation.role]:
            return current
        return membership_add(tenant=invitation.tenant, user=user, role=invitation.role)


def invitation_accept_new_user(
    *, raw_token: str, username: str, email: str, password: str
) -> tuple[Any, Membership]:
    """A new user (the checked ``username`` and ``password``; the invitation's e-mail when it
    has one) who joins the tenant; nothing is created when the invitation cannot be used."""
    with transaction.atomic():
        invitation = invitation_usable(raw_token)
        user = get_user_model().objects.create_user(
            username=username, email=invitation.email or email, password=password
        )
        membership = invitation_accept(raw_token=raw_token, user=user)
    return user, membership


def invitation_revoke(*, invitation: Invitation) -> bool:
    """Revoke a pending invitation (its link stops working); False when it was not pending."""
    with tenant_scope(invitation.tenant_id):
        revoked = Invitation.objects.filter(
            pk=invitation.pk,
            accepted_at__isnull=True,
            revoked_at__isnull=True,
        ).update(revoked_at=timezone.now())
    return bool(revoked)
