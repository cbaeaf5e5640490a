"""The identity providers' endpoints: the operator's rules and the one HTTP client.

Every URL this platform calls for single sign-on (the issuer's discovery document, the token
endpoint, the keys) is an outbound call from the operator's servers, so it passes the same
rules as tenants' model endpoints (:mod:`chatplatform.core.llm.endpoints`): a host on
``SSO_PROVIDER_HOSTS``, https unless ``SSO_ALLOW_HTTP``, public addresses only unless
``SSO_ALLOW_PRIVATE_NETWORKS``. The check runs before every call (a DNS answer can change);
calls have the timeout ``SSO_TIMEOUT_SECONDS``, follow no redirects and ignore proxy
variables. The authorization endpoint is only visited by the user's browser: its URL is
checked (scheme, host), its addresses are not.
"""

from __future__ import annotations

from typing import Any

import requests
from django.conf import settings

from chatplatform.core.llm.endpoints import (
    EndpointPolicy,
    EndpointRefused,
    Resolver,
    check_endpoint,
    check_url,
    resolve,
)

__all__ = ["EndpointRefused", "ProviderUnavailable", "checked_browser_url", "get_json"]


class ProviderUnavailable(Exception):
    """The identity provider did not answer as expected (down, an error, not JSON)."""


def sso_endpoint_policy() -> EndpointPolicy:
    return EndpointPolicy(
        allowed_hosts=tuple(settings.SSO_PROVIDER_HOSTS),
        allow_http=settings.SSO_ALLOW_HTTP,
        allow_private_networks=settings.SSO_ALLOW_PRIVATE_NETWORKS,
        subject="the identity provider's URL",
        hosts_list="identity provider hosts (SSO_PROVIDER_HOSTS)",
    )


def _policy() -> EndpointPolicy:
    policy = sso_endpoint_policy()
    if not policy.allowed_hosts:
        raise EndpointRefused(
            "this platform allows no identity providers (SSO_PROVIDER_HOSTS is empty)"
        )
    return policy


def endpoint_check(url: str, *, resolver: Resolver = resolve) -> None:
    """Raise :class:`EndpointRefused` unless the server may call ``url``."""
    check_endpoint(url, _policy(), resolver=resolver)


def checked_browser_url(url: str) -> str:
    """``url`` if the operator's rules allow it as a page the browser is sent to."""
    check_url(url, _policy())
    return url


def http_session() -> requests.Session:
    """A client for the provider's endpoints (authlib's OAuth client is one too): no proxy
    variables, no redirects (set per call)."""
    session = requests.Session()
    session.trust_env = False
    return session


def timeout() -> float:
    return float(settings.SSO_TIMEOUT_SECONDS)


def get_json(url: str) -> dict[str, Any]:
    """The JSON object at ``url``, after the operator's check; raises :class:`EndpointRefused`
    or :class:`ProviderUnavailable`."""
    endpoint_check(url)
    try:
        with http_session() as session:
            response = session.get(
                url,
                timeout=timeout(),
                allow_redirects=False,
                headers={"Accept": "application/json"},
            )
        if response.status_code != 200:
            raise ProviderUnavailable(f"{url} answered HTTP {response.status_code}")
        document = response.json()
    except requests.RequestException as exc:
        raise ProviderUnavailable(f"{url} could not be reached ({type(exc).__name__})") from None
    except ValueError:
        raise ProviderUnavailable(f"{url} did not answer with JSON") from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} did not answer with a JSON object")
    return document
