"""The test settings give each xdist worker a Redis database of its own, and the processes a
test starts (a Celery worker, servers) keep their parent's: a Celery worker on another
database than the test's broker would never see its tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def redis_url_of_settings(env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", "import tests.settings as s; print(s.REDIS_URL)"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]


def test_a_worker_moves_once_and_its_child_processes_stay():
    base = {k: v for k, v in os.environ.items() if k != "TEST_REDIS_PER_WORKER"}
    worker = {**base, "PYTEST_XDIST_WORKER": "gw1", "REDIS_URL": "redis://127.0.0.1:6379/9"}
    moved = redis_url_of_settings(worker)
    assert moved == "redis://127.0.0.1:6379/7"
    child = {**worker, "REDIS_URL": moved, "TEST_REDIS_PER_WORKER": "1"}
    assert redis_url_of_settings(child) == moved
