"""Tenants' own secrets at rest: Fernet under FIELD_ENCRYPTION_KEY (rotatable), or a key
derived from SECRET_KEY; a ciphertext no key opens reads as unset, never as a crash."""

from __future__ import annotations

from cryptography.fernet import Fernet

from chatplatform.encryption import decrypt, encrypt

SECRET = "sk-tenant-secret-42"


def test_round_trip_with_the_key_derived_from_the_secret_key(settings):
    settings.FIELD_ENCRYPTION_KEY = []
    token = encrypt(SECRET)
    assert SECRET not in token and decrypt(token) == SECRET
    assert encrypt("") == "" and decrypt("") == ""


def test_keys_rotate_newest_first(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.FIELD_ENCRYPTION_KEY = [old]
    token = encrypt(SECRET)
    settings.FIELD_ENCRYPTION_KEY = [new, old]
    assert decrypt(token) == SECRET  # the old key still opens what it sealed
    assert Fernet(new.encode()).decrypt(encrypt(SECRET).encode()).decode() == SECRET
    settings.FIELD_ENCRYPTION_KEY = [new]
    assert decrypt(token) == ""  # the old key is gone: the secret reads as unset
