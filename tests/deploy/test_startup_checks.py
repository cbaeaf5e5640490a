"""Serving processes refuse to start with the manifest static storage and no manifest: every
page would answer 500 (its static file URLs come from the manifest ``collectstatic`` writes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from config.startup import require_static_manifest

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_STORAGE = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}


@pytest.mark.parametrize("entry_point", ["config.asgi", "config.wsgi"])
def test_servers_refuse_to_start_without_the_static_manifest(entry_point, tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": "a-secret-key-for-this-test-only-0123456789-abcdefghijklmnop",
        "STATIC_MANIFEST": "1",
        "STATIC_ROOT": str(tmp_path / "static"),
    }
    result = subprocess.run(
        [sys.executable, "-c", f"import {entry_point}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "No static files manifest" in result.stderr
    assert "collectstatic --noinput" in result.stderr


def test_the_manifest_check_passes_once_collectstatic_wrote_it(tmp_path):
    with override_settings(STORAGES=MANIFEST_STORAGE, STATIC_ROOT=tmp_path):
        with pytest.raises(ImproperlyConfigured):
            require_static_manifest()
        manifest = {"paths": {}, "version": "1.1", "hash": ""}
        (tmp_path / "staticfiles.json").write_text(json.dumps(manifest))
        require_static_manifest()


def test_the_plain_storage_needs_no_manifest(tmp_path):
    with override_settings(STATIC_ROOT=tmp_path):  # the test settings' plain storage
        require_static_manifest()
