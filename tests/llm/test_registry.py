"""Building providers by name, and the offline fallback without credentials."""

from __future__ import annotations

import pytest

from chatplatform.core.llm import (
    ChatRequest,
    RequestMessage,
    build_provider,
    build_provider_or_offline,
)
from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.core.llm.openai_provider import OpenAICompatibleProvider
from chatplatform.core.llm.providers import UnknownProvider
from tests.fakes.anthropic_fake import FakeAnthropic

from .helpers import collect, text_of


def test_builds_each_provider_with_its_timeout() -> None:
    anthropic = build_provider("anthropic", api_key="k", base_url="http://127.0.0.1:9", timeout=7)
    openai = build_provider("openai", base_url="http://127.0.0.1:9/v1", timeout=3)

    assert isinstance(anthropic, AnthropicProvider) and anthropic.timeout == 7
    assert isinstance(openai, OpenAICompatibleProvider) and openai.timeout == 3
    assert isinstance(build_provider("offline"), OfflineProvider)


def test_unknown_name_and_missing_key_are_errors() -> None:
    with pytest.raises(UnknownProvider):
        build_provider("gpt-local")
    with pytest.raises(ValueError, match="api_key"):
        build_provider("anthropic", api_key="")


@pytest.mark.parametrize(
    ("name", "api_key", "base_url"),
    [("anthropic", None, None), ("anthropic", "", "http://x"), ("openai", None, None)],
)
def test_degrades_to_offline_without_credentials(
    name: str, api_key: str | None, base_url: str | None
) -> None:
    provider = build_provider_or_offline(name, api_key=api_key, base_url=base_url, timeout=5)

    assert isinstance(provider, OfflineProvider)
    assert provider.offline


def test_keeps_a_configured_provider() -> None:
    local = build_provider_or_offline("openai", base_url="http://127.0.0.1:11434/v1")
    assert isinstance(local, OpenAICompatibleProvider)
    assert not local.offline


@pytest.mark.asyncio
async def test_built_anthropic_provider_talks_to_the_server(fake_anthropic: FakeAnthropic) -> None:
    provider = build_provider_or_offline("anthropic", api_key="k", base_url=fake_anthropic.url)
    events = await collect(
        provider.stream(ChatRequest(model="m", messages=[RequestMessage("user", "hi")]))
    )

    assert text_of(events) == "Hello from the fake model."
    await provider.aclose()
