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


def require_static_manifest() -> None:
    """Refuse to serve pages whose static file URLs cannot be built.

    With ``DEBUG`` off, static files are served under content-hashed names that
    ``manage.py collectstatic`` writes into a manifest in ``STATIC_ROOT`` (the release process
    runs it); every page looks its scripts and style sheets up there, so without the manifest
    every HTML page would answer 500. Raises :class:`ImproperlyConfigured` when the manifest
    storage is configured and its manifest is missing.
    """
    from django.contrib.staticfiles.storage import ManifestFilesMixin, staticfiles_storage

    if isinstance(staticfiles_storage, ManifestFilesMixin) and (
        staticfiles_storage.read_manifest() is None
    ):
        raise ImproperlyConfigured(
            f"No static files manifest in STATIC_ROOT ({settings.STATIC_ROOT}): run "
            "`python manage.py collectstatic --noinput` (the release process does) before "
            "starting the web process."
        )
