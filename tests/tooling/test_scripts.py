"""The tooling's scripts start as their docstrings say (``.venv/bin/python PATH``), from any
directory: they find the project and set Django up before importing the runtime's modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "script",
    [
        "tooling/evaluation/locomo_offline.py",
        "tooling/evaluation/misses.py",
        "tooling/benchmarks/dense_cost.py",
    ],
)
def test_the_script_starts(script, tmp_path):
    completed = subprocess.run(
        [sys.executable, str(ROOT / script), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("usage:")
