"""``make test`` on a fresh clone, with nothing configured (the embedded SQLite): the tests that
need PostgreSQL are skipped, with the reason, instead of failing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNCONFIGURED = ("DATABASE_URL", "REDIS_URL", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")


def test_postgresql_tests_skip_with_the_reason_on_the_embedded_database():
    env = {k: v for k, v in os.environ.items() if k not in UNCONFIGURED}
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs"),
            *("-m", "not slow and not browser", "tests/chats/test_hot_writes_contract.py"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "failed" not in output
    assert " skipped" in output
    assert "needs PostgreSQL (DATABASE_URL=postgres://...); the test database is sqlite3" in output
