"""The vendored front-end libraries match their manifest (static/vendor/MANIFEST.json)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
MANIFEST = ROOT / "static" / "vendor" / "MANIFEST.json"


def _vendor_script():
    spec = importlib.util.spec_from_file_location("vendor_script", ROOT / "scripts" / "vendor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _libraries() -> list[dict]:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))["libraries"]


def test_every_vendored_file_matches_its_hash_and_each_library_has_its_licence():
    assert _vendor_script().problems(_libraries(), ROOT) == []


@pytest.mark.parametrize("library", _libraries(), ids=lambda lib: lib["npm"])
def test_each_library_is_pinned_with_a_licence(library):
    version = library["version"]
    assert version and version[0].isdigit() and not any(c in version for c in "^~*x<>")
    assert library["license"]
    assert library["licence_file"] in library["files"]
    assert (ROOT / library["path"] / library["licence_file"]).stat().st_size > 100


def test_every_folder_under_static_vendor_is_in_the_manifest():
    listed = {library["path"] for library in _libraries()}
    on_disk = {
        str(folder.relative_to(ROOT))
        for folder in (ROOT / "static" / "vendor").iterdir()
        if folder.is_dir()
    }
    assert on_disk <= listed


def test_a_changed_file_is_reported(tmp_path):
    library = next(lib for lib in _libraries() if lib["npm"] == "marked")
    folder = tmp_path / library["path"]
    folder.mkdir(parents=True)
    for name in library["files"]:
        (folder / name).write_bytes((ROOT / library["path"] / name).read_bytes())
    assert _vendor_script().problems([library], tmp_path) == []
    (folder / "marked.umd.js").write_text("tampered")
    assert _vendor_script().problems([library], tmp_path) == [
        f"marked: {library['path']}/marked.umd.js differs from its hash"
    ]


def test_the_accessibility_checker_is_not_served():
    axe = next(lib for lib in _libraries() if lib["npm"] == "axe-core")
    static_roots = [str(Path(d).relative_to(ROOT)) for d in settings.STATICFILES_DIRS]
    assert not any(axe["path"].startswith(root) for root in static_roots)
