"""The token estimator, the reference BPE and the development corpus: fixtures for the token
counting tests and the estimator's fitting and evaluation (``tests/tooling/``), imported by
``tests/conftest.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DEV_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "tokens-dev.jsonl"


@pytest.fixture(scope="session")
def estimator():
    from chatplatform.core.tokens.estimator import load_default_estimator

    return load_default_estimator()


@pytest.fixture(scope="session")
def reference():
    from chatplatform.core.tokens import get_counter

    return get_counter("o200k_base")


@pytest.fixture(scope="session")
def dev_rows():
    if not DEV_CORPUS.is_file():
        pytest.skip(f"development corpus {DEV_CORPUS} not available")
    with DEV_CORPUS.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
