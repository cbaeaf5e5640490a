"""The vendored front-end libraries: fetch them from npm, or check them against the manifest.

``static/vendor/MANIFEST.json`` lists each library: its npm name and exact version, its SPDX
licence, the folder it lives in, and each file taken (the path inside the npm package and the
SHA-256 of the file as stored). Source map comments are taken off the files (the maps are not
shipped, and a browser would ask for them).

    python scripts/vendor.py            # check the files on disk (no network, no npm)
    python scripts/vendor.py --fetch    # npm pack each library, copy its files, then check

Only ``--fetch`` needs npm; running and testing the platform never does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "static" / "vendor" / "MANIFEST.json"
SOURCE_MAP = re.compile(rb"\n//# sourceMappingURL=[^\n]*\n?\Z")
NPM_TIMEOUT_SECONDS = 120


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["libraries"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def problems(libraries: list[dict], root: Path = ROOT) -> list[str]:
    """What differs between the manifest and the files on disk (empty when all is well)."""
    found = []
    for library in libraries:
        folder = root / library["path"]
        files = library["files"]
        if library["licence_file"] not in files:
            found.append(f"{library['npm']}: its licence file is not among its files")
        for name, entry in files.items():
            target = folder / name
            if not target.is_file():
                found.append(f"{library['npm']}: {target.relative_to(root)} is missing")
            elif sha256(target.read_bytes()) != entry["sha256"]:
                found.append(f"{library['npm']}: {target.relative_to(root)} differs from its hash")
    return found


def fetch(library: dict, work: Path) -> None:
    """npm pack the library's pinned version and copy its files into place."""
    spec = f"{library['npm']}@{library['version']}"
    npm = shutil.which("npm") or "npm"
    # The spec comes from the committed manifest, never from user input.
    packed = subprocess.run(  # noqa: S603
        [npm, "pack", spec, "--silent"],
        cwd=work,
        check=True,
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT_SECONDS,
    ).stdout.split()[-1]
    unpacked = work / library["npm"].replace("/", "_")
    with tarfile.open(work / packed) as archive:
        archive.extractall(unpacked, filter="data")
    folder = ROOT / library["path"]
    folder.mkdir(parents=True, exist_ok=True)
    for name, entry in library["files"].items():
        data = (unpacked / "package" / entry["from"]).read_bytes()
        (folder / name).write_bytes(SOURCE_MAP.sub(b"\n", data))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetch", action="store_true", help="re-fetch every library from npm")
    args = parser.parse_args()
    libraries = load_manifest()
    if args.fetch:
        if shutil.which("npm") is None:
            print("npm is not installed: it is needed only to fetch", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as work:
            for library in libraries:
                print(f"fetching {library['npm']}@{library['version']}")
                fetch(library, Path(work))
    found = problems(libraries)
    for problem in found:
        print(problem, file=sys.stderr)
    if not found:
        print(f"{len(libraries)} libraries match {MANIFEST.relative_to(ROOT)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
