"""A new tenant with its first admin, as an operator sets one up on a fresh install: the tenant
(with the default preset as its active policy), its admin (an existing user with that e-mail,
or a new one without a password), a one-time link for the admin to set a password, and
optionally a first API key. All of it or nothing: a tenant that exists already, or an e-mail
that does not name one usable account, changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.text import slugify

from chatplatform.models import MembershipRole, Tenant
from chatplatform.services import api_key_create, membership_add, tenant_create
from chatplatform.tenancy.scoping import all_tenants


class OnboardingRefused(ValueError):
    """The tenant cannot be set up as asked (the message says why); nothing was changed."""


@dataclass(frozen=True)
class Onboarded:
    tenant: Tenant
    admin: Any
    admin_created: bool
    #: Opens the page where the admin sets a password; works once, for PASSWORD_RESET_TIMEOUT.
    set_password_link: str
    #: The raw API key (acts as the admin, admin role), shown once; None when not asked for.
    api_key: str | None


def set_password_link(user: Any, base_url: str) -> str:
    """A one-time link (Django's password reset token) to the page that sets ``user``'s
    password on the site at ``base_url``. It stops working once a password is set or the
    user logs in, and after ``PASSWORD_RESET_TIMEOUT``."""
    path = reverse(
        "password_reset_confirm",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )
    return base_url.rstrip("/") + path


def tenant_onboard(
    *, name: str, admin_email: str, base_url: str, api_key: bool = False
) -> Onboarded:
    """Create the tenant ``name`` with ``admin_email``'s user as its admin (see the module).
    Raises :class:`OnboardingRefused`, with nothing changed, when a tenant of that name or
    slug exists, or when the e-mail is invalid or names no single active account."""
    name = name.strip()
    slug = slugify(name)[:64]
    if not slug:
        raise OnboardingRefused(f"The name {name!r} gives no usable slug: use letters or digits.")
    email = get_user_model().objects.normalize_email(admin_email.strip())
    try:
        validate_email(email)
    except ValidationError:
        raise OnboardingRefused(f"{email!r} is not a valid e-mail address.") from None
    with transaction.atomic():
        with all_tenants():
            existing = Tenant.objects.filter(Q(slug=slug) | Q(name__iexact=name)).first()
        if existing is not None:
            raise OnboardingRefused(
                f'The tenant "{existing.name}" ({existing.slug}) exists already; nothing was '
                "changed. Its admins invite people from the admin (Platform › Invitations)."
            )
        admin, created = _admin_user(email)
        tenant = tenant_create(name=name, slug=slug)
        membership_add(tenant=tenant, user=admin, role=MembershipRole.ADMIN)
        raw_key = None
        if api_key:
            _, raw_key = api_key_create(
                tenant=tenant, name=f"First key of {email}", user=admin, role=MembershipRole.ADMIN
            )
        admin.refresh_from_db()  # the staff flag the admin role set
        link = set_password_link(admin, base_url)
    return Onboarded(tenant, admin, created, link, raw_key)


def _admin_user(email: str) -> tuple[Any, bool]:
    """The one active user with ``email`` (or that username), else a new one without a
    password (username: the e-mail)."""
    User = get_user_model()
    matches = list(User.objects.filter(Q(email__iexact=email) | Q(username__iexact=email))[:2])
    if len(matches) > 1:
        raise OnboardingRefused(
            f"Several users have the e-mail {email!r}; give the admin an e-mail of their own."
        )
    if matches:
        user = matches[0]
        if not user.is_active:
            raise OnboardingRefused(f"The user with the e-mail {email!r} is deactivated.")
        return user, False
    return User.objects.create_user(username=email, email=email, password=None), True
