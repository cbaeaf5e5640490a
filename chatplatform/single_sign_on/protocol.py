"""OpenID Connect's authorization code flow with PKCE, on authlib.

- discovery: the issuer's ``/.well-known/openid-configuration``, whose ``issuer`` must be the
  configured one; cached (``SSO_DISCOVERY_CACHE_SECONDS``), like the provider's keys;
- the start: ``state``, ``nonce`` and a PKCE verifier (S256) kept in the user's session, the
  browser sent to the authorization endpoint (authlib's ``OAuth2Session`` builds the URL);
- the finish: the code exchanged at the token endpoint with the client secret and the
  verifier (authlib's ``fetch_token``), the ID token's signature checked with the provider's
  keys (joserfc, the JOSE library authlib uses) and its claims (issuer, audience, expiry,
  issued-at, nonce, azp) with authlib's ``CodeIDToken``.

Only asymmetric signatures are accepted (never ``none`` nor an HMAC keyed by the client
secret). Every failure is a :class:`SignOnRefused` with a code for the audit log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client import OAuthError
from authlib.integrations.requests_client import OAuth2Session
from authlib.oidc.core import CodeIDToken
from django.conf import settings
from django.core.cache import cache
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, InvalidClaimError, InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from chatplatform.models import IdentityProvider

from .provider_endpoints import (
    EndpointRefused,
    ProviderUnavailable,
    checked_browser_url,
    endpoint_check,
    get_json,
    timeout,
)

#: Signature algorithms an ID token may use: public-key ones only.
ASYMMETRIC_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
)  # fmt: skip
SCOPE = "openid email profile"
#: Seconds of clock difference allowed between the provider and this platform.
LEEWAY_SECONDS = 60


class SignOnRefused(Exception):
    """A single sign-on that cannot go on. ``code`` goes to the audit log, ``message`` to the
    person logging in."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class ProviderMetadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    algorithms: tuple[str, ...]


@dataclass(frozen=True)
class PendingSignOn:
    """What the start keeps in the session until the provider sends the browser back."""

    tenant_id: int
    state: str
    nonce: str
    code_verifier: str
    redirect_uri: str
    next_url: str = ""

    def as_session(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_session(cls, data: Any) -> PendingSignOn | None:
        try:
            return cls(**data)
        except TypeError:
            return None


@dataclass(frozen=True)
class VouchedIdentity:
    """Who the provider vouched for: its subject and their verified e-mail address."""

    subject: str
    email: str


def _cache_key(kind: str, url: str) -> str:
    return f"sso:{kind}:{hashlib.sha256(url.encode()).hexdigest()}"


def provider_metadata(provider: IdentityProvider) -> ProviderMetadata:
    """The provider's discovery document (cached), checked; the issuer passes the operator's
    rules before every use."""
    issuer = provider.issuer
    discovery_url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    endpoint_check(discovery_url)  # every time: the operator's rules or a DNS answer change
    key = _cache_key("discovery", issuer)
    cached = cache.get(key)
    if isinstance(cached, ProviderMetadata):
        return cached
    document = get_json(discovery_url)
    if document.get("issuer") != issuer:
        raise ProviderUnavailable(
            f"the discovery document names the issuer {document.get('issuer')!r}, not {issuer!r}"
        )
    urls = {}
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(name)
        if not isinstance(value, str) or not value:
            raise ProviderUnavailable(f"the discovery document has no {name}")
        urls[name] = value
    offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    algorithms = tuple(a for a in offered if a in ASYMMETRIC_ALGORITHMS)
    if not algorithms:
        raise ProviderUnavailable("the provider signs ID tokens with no public-key algorithm")
    metadata = ProviderMetadata(issuer=issuer, algorithms=algorithms, **urls)
    cache.set(key, metadata, settings.SSO_DISCOVERY_CACHE_SECONDS)
    return metadata


def _key_set(metadata: ProviderMetadata, *, fresh: bool = False) -> KeySet:
    key = _cache_key("jwks", metadata.jwks_uri)
    document = None if fresh else cache.get(key)
    if not isinstance(document, dict):
        document = get_json(metadata.jwks_uri)
        cache.set(key, document, settings.SSO_DISCOVERY_CACHE_SECONDS)
    try:
        return KeySet.import_key_set(document)  # type: ignore[arg-type]
    except (JoseError, ValueError, KeyError, TypeError) as exc:
        raise ProviderUnavailable(f"the provider's keys cannot be read ({exc})") from None


def _client(provider: IdentityProvider, redirect_uri: str, **kwargs: Any) -> OAuth2Session:
    client = OAuth2Session(
        client_id=provider.client_id,
        scope=SCOPE,
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        **kwargs,
    )
    client.trust_env = False
    return client


def sign_on_begin(
    provider: IdentityProvider, *, redirect_uri: str, next_url: str = ""
) -> tuple[str, PendingSignOn]:
    """The provider's authorization URL to send the browser to, and what to keep in the
    session until it comes back."""
    metadata = provider_metadata(provider)
    authorization_endpoint = checked_browser_url(metadata.authorization_endpoint)
    pending = PendingSignOn(
        tenant_id=provider.tenant_id,
        state=generate_token(32),
        nonce=generate_token(32),
        code_verifier=generate_token(64),
        redirect_uri=redirect_uri,
        next_url=next_url,
    )
    with _client(provider, redirect_uri) as client:
        url, _state = client.create_authorization_url(
            authorization_endpoint,
            state=pending.state,
            code_verifier=pending.code_verifier,
            nonce=pending.nonce,
        )
    return url, pending


def _exchange_code(
    provider: IdentityProvider, metadata: ProviderMetadata, pending: PendingSignOn, code: str
) -> dict[str, Any]:
    endpoint_check(metadata.token_endpoint)
    with _client(
        provider,
        pending.redirect_uri,
        client_secret=provider.client_secret(),
        token_endpoint_auth_method="client_secret_basic",  # noqa: S106 (a method's name)
    ) as client:
        try:
            token = client.fetch_token(
                metadata.token_endpoint,
                grant_type="authorization_code",
                code=code,
                code_verifier=pending.code_verifier,
                timeout=timeout(),
                allow_redirects=False,
            )
        except OAuthError as exc:
            raise SignOnRefused(
                "The identity provider did not accept this log-in.",
                code=f"token_refused:{exc.error}",
            ) from None
        except requests.RequestException as exc:
            raise ProviderUnavailable(
                f"the token endpoint could not be reached ({type(exc).__name__})"
            ) from None
        except ValueError:
            raise ProviderUnavailable("the token endpoint did not answer with JSON") from None
    return dict(token)


CLAIM_REFUSALS = {
    "iss": "id_token_issuer",
    "aud": "id_token_audience",
    "azp": "id_token_audience",
    "nonce": "id_token_nonce",
}


def _validated_claims(
    provider: IdentityProvider, metadata: ProviderMetadata, pending: PendingSignOn, token: dict
) -> dict[str, Any]:
    raw = token.get("id_token")
    if not isinstance(raw, str) or not raw:
        raise SignOnRefused("The identity provider sent no ID token.", code="id_token_missing")
    refused = SignOnRefused("The identity provider's answer could not be trusted.", code="")
    try:
        try:
            decoded = jwt.decode(raw, _key_set(metadata), algorithms=list(metadata.algorithms))
        except InvalidKeyIdError:  # the provider rotated its keys
            decoded = jwt.decode(
                raw, _key_set(metadata, fresh=True), algorithms=list(metadata.algorithms)
            )
    except JoseError as exc:
        refused.code = f"id_token_signature:{exc.error}"
        raise refused from None
    except ValueError:
        refused.code = "id_token_malformed"
        raise refused from None
    claims = CodeIDToken(
        decoded.claims,
        decoded.header,
        {
            "iss": {"essential": True, "value": metadata.issuer},
            "aud": {"essential": True, "value": provider.client_id},
        },
        {
            "nonce": pending.nonce,
            "client_id": provider.client_id,
            "access_token": token.get("access_token"),
        },
    )
    try:
        claims.validate(leeway=LEEWAY_SECONDS)
    except ExpiredTokenError:
        refused.code = "id_token_expired"
        raise refused from None
    except InvalidClaimError as exc:
        claim = str(getattr(exc, "claim", "") or "")
        refused.code = CLAIM_REFUSALS.get(claim, f"id_token_claim:{claim or exc.error}")
        raise refused from None
    except JoseError as exc:
        refused.code = f"id_token_claims:{exc.error}"
        raise refused from None
    return dict(claims)


def _vouched_identity(provider: IdentityProvider, claims: dict[str, Any]) -> VouchedIdentity:
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise SignOnRefused(
            "The identity provider did not share your e-mail address.", code="email_missing"
        )
    verified = claims.get("email_verified", True)
    if verified is not True and str(verified).lower() != "true":
        raise SignOnRefused(
            "Your identity provider has not verified your e-mail address.",
            code="email_unverified",
        )
    email = email.strip().lower()
    if email.rsplit("@", 1)[1] not in provider.domains:
        raise SignOnRefused(
            "Your e-mail address's domain does not log in here.", code="email_domain"
        )
    return VouchedIdentity(subject=str(claims.get("sub", "")), email=email)


def sign_on_finish(
    provider: IdentityProvider, pending: PendingSignOn, *, code: str
) -> VouchedIdentity:
    """Exchange ``code`` and validate the ID token; who the provider vouched for.
    Raises :class:`SignOnRefused`, :class:`EndpointRefused` or :class:`ProviderUnavailable`."""
    metadata = provider_metadata(provider)
    token = _exchange_code(provider, metadata, pending, code)
    claims = _validated_claims(provider, metadata, pending, token)
    return _vouched_identity(provider, claims)


__all__ = [
    "EndpointRefused",
    "PendingSignOn",
    "ProviderUnavailable",
    "SignOnRefused",
    "VouchedIdentity",
    "provider_metadata",
    "sign_on_begin",
    "sign_on_finish",
]
