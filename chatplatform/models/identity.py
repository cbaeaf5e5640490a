"""A tenant's identity provider: single sign-on with OpenID Connect, set up by the operator."""

from __future__ import annotations

from django.db import models

from chatplatform.encryption import decrypt, encrypt
from chatplatform.tenancy.scoping import TenantOwnedModel

from .tenants import MembershipRole


def normalized_domains(text: str) -> list[str]:
    """The e-mail domains of ``text`` (one per line or separated by commas or spaces),
    lower-case, without a leading ``@``, each once, in order."""
    domains: list[str] = []
    for word in text.replace(",", " ").split():
        domain = word.strip().lstrip("@").rstrip(".").lower()
        if domain and domain not in domains:
            domains.append(domain)
    return domains


class IdentityProvider(TenantOwnedModel):
    """Where a tenant's people log in with single sign-on (an OpenID Connect provider): its
    issuer, this platform's client there (the secret stored encrypted, as tenants' model keys
    are), the e-mail domains it vouches for and the role a new member gets. One per tenant."""

    enabled = models.BooleanField(
        default=True, help_text="Offer single sign-on to this tenant's people."
    )
    issuer = models.URLField(
        max_length=500,
        help_text="The provider's issuer URL, exactly as its discovery document "
        "(/.well-known/openid-configuration) names it, e.g. https://login.example.com/realms/acme.",
    )
    client_id = models.CharField(
        max_length=255, help_text="This platform's client ID, registered at the provider."
    )
    client_secret_encrypted = models.TextField(
        blank=True,
        editable=False,
        help_text="The client secret, encrypted (Fernet); never shown again.",
    )
    email_domains = models.TextField(
        help_text="The e-mail domains whose people log in here, one per line (example.com). "
        "A domain belongs to one tenant only.",
    )
    default_role = models.CharField(
        max_length=16,
        choices=MembershipRole.choices,
        default=MembershipRole.MEMBER,
        help_text="The role of someone who joins the tenant by logging in here for the first "
        "time; an existing member keeps their role.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant"], name="identityprovider_one_per_tenant"),
        ]
        verbose_name = "single sign-on provider"

    def __str__(self) -> str:
        return f"Single sign-on of {self.tenant}"

    @property
    def domains(self) -> list[str]:
        return normalized_domains(self.email_domains)

    @property
    def has_client_secret(self) -> bool:
        return bool(self.client_secret_encrypted)

    def client_secret(self) -> str:
        """The decrypted secret; empty when none is set or no configured key opens it."""
        return decrypt(self.client_secret_encrypted)

    def set_client_secret(self, raw: str) -> None:
        """Store ``raw`` encrypted (empty clears it); the caller saves the provider."""
        self.client_secret_encrypted = encrypt(raw)
