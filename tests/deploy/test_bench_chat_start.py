"""``manage.py bench_chat`` runs as its help says on a fresh checkout: production settings
(``DEBUG`` off) and no ``collectstatic`` run before (an empty ``STATIC_ROOT``). A small run
answers every turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.test_production_start import production_env
from tests.scale.processes import ROOT, free_port

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_small_benchmark_runs_without_collected_static_files(
    tmp_path: Path, presets: None
) -> None:
    static_root = tmp_path / "static"  # never collected into
    env = production_env(static_root, free_port())
    workers = "2" if os.environ.get("REDIS_URL") else "1"  # one socket per server with Redis
    command = ["bench_chat", "--clients", "3", "--turns", "2", "--workers", workers, "--json"]
    run = subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["errors"] == 0 and report["lost"] == 0, run.stdout + run.stderr
    assert report["turns_total"] == 6
    assert not static_root.exists() or not any(static_root.iterdir())
