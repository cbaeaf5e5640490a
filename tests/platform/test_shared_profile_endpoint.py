"""The shared OpenAI-compatible profile ("Llama 3.2 (Ollama)") calls the operator's
``OPENAI_BASE_URL``, like every platform-wide profile without a base URL of its own; a base URL
the operator set on the profile stays."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps

from chatplatform.model_endpoints import provider_access
from chatplatform.models import ModelProfile

pytestmark = pytest.mark.django_db

OLLAMA = "Llama 3.2 (Ollama)"
OPERATOR_URL = "http://gpu.internal:8000/v1"


def shared(name: str) -> ModelProfile:
    return ModelProfile._base_manager.get(tenant=None, name=name)


def test_the_shared_ollama_profile_calls_the_operators_endpoint(settings: Any, presets: None):
    settings.OPENAI_BASE_URL = OPERATOR_URL
    access = provider_access(shared(OLLAMA))
    assert access is not None
    assert access.base_url == OPERATOR_URL


def test_without_an_operator_endpoint_it_names_none(settings: Any, presets: None) -> None:
    """No hidden default host: without ``OPENAI_BASE_URL`` (nor a key) the reply falls back
    to the offline provider, as for any provider without credentials."""
    settings.OPENAI_BASE_URL = ""
    access = provider_access(shared(OLLAMA))
    assert access is not None
    assert access.base_url is None


def test_the_migration_clears_only_the_seeded_localhost_url(settings: Any, presets: None) -> None:
    migration = importlib.import_module(
        "chatplatform.migrations.0016_shared_profiles_use_operator_endpoint"
    )
    ollama = shared(OLLAMA)
    ollama.base_url = migration.SEEDED_URL
    ollama.save(update_fields=["base_url"])
    custom = ModelProfile._base_manager.create(
        tenant=None,
        name="vLLM (operator's)",
        provider="openai",
        model="qwen",
        base_url="http://vllm.internal:8000/v1",
        context_window=32_000,
        max_output_tokens=4_000,
        tokenizer="estimator",
    )

    migration.forwards(apps, None)

    assert shared(OLLAMA).base_url == ""
    custom.refresh_from_db()
    assert custom.base_url == "http://vllm.internal:8000/v1"
    settings.OPENAI_BASE_URL = OPERATOR_URL
    access = provider_access(shared(OLLAMA))
    assert access is not None and access.base_url == OPERATOR_URL
