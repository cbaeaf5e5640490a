"""Checks every serving process runs before it accepts work."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def require_secret_key() -> None:
    """Refuse to serve without a secret key (sessions, CSRF and API tickets sign with it).

    Raises :class:`ImproperlyConfigured` when ``SECRET_KEY`` is empty, which settings allow
    only so that command-line tools that sign nothing run without one.
    """
    if not _configured_secret():
        raise ImproperlyConfigured(
            "SECRET_KEY is required when DEBUG is off (set DEBUG=1 for local development)."
        )


def _configured_secret() -> str:
    try:
        return str(settings.SECRET_KEY)
    except ImproperlyConfigured:  # Django refuses to hand out an empty key
        return ""
