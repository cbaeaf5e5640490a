"""Secrets stored encrypted at rest (tenants' own model API keys), with cryptography's Fernet.

Keys come from ``FIELD_ENCRYPTION_KEY`` (Fernet keys, newest first: the first encrypts, all
decrypt, so a key can be rotated); without it one key is derived from ``SECRET_KEY``. A
ciphertext that no key opens reads as empty (the secret is gone, never a crash), and the
caller treats it as "no key set".
"""

from __future__ import annotations

import base64
import hashlib
import logging
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    if keys:
        try:
            return MultiFernet([Fernet(key.encode()) for key in keys])
        except ValueError as exc:
            raise ImproperlyConfigured(
                "FIELD_ENCRYPTION_KEY must hold Fernet keys (Fernet.generate_key())"
            ) from exc
    if not secret_key:
        raise ImproperlyConfigured("encrypting secrets needs FIELD_ENCRYPTION_KEY or SECRET_KEY")
    digest = hashlib.sha256(b"chatplatform field encryption\x00" + secret_key.encode()).digest()
    return MultiFernet([Fernet(base64.urlsafe_b64encode(digest))])


def fernet() -> MultiFernet:
    keys = tuple(k for k in getattr(settings, "FIELD_ENCRYPTION_KEY", []) if k)
    return _fernet(keys, settings.SECRET_KEY)


def encrypt(plaintext: str) -> str:
    """The ciphertext of ``plaintext`` (empty for empty)."""
    if not plaintext:
        return ""
    return fernet().encrypt(plaintext.encode()).decode()


def decrypt(ciphertext: str) -> str:
    """The plaintext of ``ciphertext``; empty when it is empty or no configured key opens it."""
    if not ciphertext:
        return ""
    try:
        return fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        logger.error("a stored secret cannot be decrypted with the configured keys")
        return ""
