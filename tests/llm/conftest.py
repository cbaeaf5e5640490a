"""Fixtures for the provider tests: the fake servers, providers pointed at them, fast sleeps."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.openai_provider import OpenAICompatibleProvider
from chatplatform.core.llm.retry import RetryPolicy
from tests.fakes.anthropic_fake import FakeAnthropic
from tests.fakes.fixtures import (
    fake_anthropic,
    fake_anthropic_server,
    fake_openai,
    fake_openai_server,
)
from tests.fakes.openai_fake import FakeOpenAI

from .helpers import RecordingSleep

__all__ = ["fake_anthropic", "fake_anthropic_server", "fake_openai", "fake_openai_server"]


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def anthropic_provider(
    fake_anthropic: FakeAnthropic, sleeps: RecordingSleep
) -> Callable[..., AnthropicProvider]:
    """Factory: an AnthropicProvider on the fake, with recorded sleeps and a fixed jitter."""

    def make(**overrides: object) -> AnthropicProvider:
        options: dict[str, object] = {
            "api_key": "test-key",
            "base_url": fake_anthropic.url,
            "timeout": 5.0,
            "retry_policy": RetryPolicy(),
            "sleep": sleeps,
            "rng": lambda: 0.5,
        }
        options.update(overrides)
        return AnthropicProvider(**options)  # type: ignore[arg-type]

    return make


@pytest.fixture
def openai_provider(
    fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> Callable[..., OpenAICompatibleProvider]:
    def make(**overrides: object) -> OpenAICompatibleProvider:
        options: dict[str, object] = {
            "base_url": f"{fake_openai.url}/v1",
            "timeout": 5.0,
            "sleep": sleeps,
            "rng": lambda: 0.5,
        }
        options.update(overrides)
        return OpenAICompatibleProvider(**options)  # type: ignore[arg-type]

    return make
