"""The registry of providers: each entry answers for itself; building providers by name, and
the offline fallback without credentials (never for an unknown name)."""

from __future__ import annotations

from types import SimpleNamespace

import anthropic
import httpx2
import openai
import pytest

from chatplatform.core.llm import (
    ChatRequest,
    RequestMessage,
    build_provider,
    build_provider_or_offline,
)
from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.capabilities import COMPACTION
from chatplatform.core.llm.errors import ProviderTimedOut, StreamInterrupted
from chatplatform.core.llm.image_tokens import anthropic_image_tokens
from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.core.llm.openai_provider import OpenAICompatibleProvider
from chatplatform.core.llm.providers import (
    ANTHROPIC,
    OFFLINE,
    OPENAI,
    PROVIDER_NAMES,
    PROVIDERS,
    UnknownProvider,
    provider_choices,
    provider_kind,
)
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


def test_an_unknown_name_is_an_error_not_the_offline_provider() -> None:
    with pytest.raises(UnknownProvider, match="'gpt-local'; expected one of anthropic, openai"):
        build_provider_or_offline("gpt-local", api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(UnknownProvider):
        provider_kind("Anthropic")  # names are exact


@pytest.mark.parametrize(
    ("name", "api_key", "base_url", "suffice"),
    [
        ("anthropic", "k", None, True),
        ("anthropic", None, "http://x", False),
        ("openai", None, "http://x", True),
        ("openai", "k", None, True),
        ("openai", None, None, False),
        ("offline", None, None, True),
    ],
)
def test_each_entry_answers_for_its_credentials(
    name: str, api_key: str | None, base_url: str | None, suffice: bool
) -> None:
    assert provider_kind(name).credentials_suffice(api_key, base_url) is suffice


def test_each_entry_names_the_settings_of_the_platforms_credentials() -> None:
    settings = SimpleNamespace(
        ANTHROPIC_API_KEY="a-key", ANTHROPIC_BASE_URL="", OPENAI_API_KEY="", OPENAI_BASE_URL="u"
    )
    assert ANTHROPIC.platform_credentials(settings) == ("a-key", None)
    assert OPENAI.platform_credentials(settings) == (None, "u")
    assert OFFLINE.platform_credentials(settings) == (None, None)


def test_only_anthropic_offers_its_own_context_management() -> None:
    capabilities = {"context_management": {"supported": True, COMPACTION: {"supported": True}}}
    assert ANTHROPIC.supports_context_strategy(capabilities, COMPACTION)
    assert not ANTHROPIC.supports_context_strategy({}, COMPACTION)
    # The same capabilities reported for a model of another provider are not sent.
    assert not OPENAI.supports_context_strategy(capabilities, COMPACTION)
    assert not OFFLINE.supports_context_strategy(capabilities, COMPACTION)


def test_prompt_caching_and_simulation_by_entry() -> None:
    assert [k.name for k in PROVIDERS.values() if k.breakpoint_cache] == ["anthropic", "offline"]
    assert [k.name for k in PROVIDERS.values() if k.provider_cache] == ["anthropic"]
    assert [k.name for k in PROVIDERS.values() if k.simulated] == ["offline"]
    assert [k.name for k in PROVIDERS.values() if k.counts_tokens] == ["anthropic"]


def test_image_tokens_are_each_entrys_own_formula() -> None:
    assert ANTHROPIC.image_tokens(1600, 1200) == 1534
    assert OPENAI.image_tokens(1600, 1200) == 765
    # The offline provider bills as Anthropic's cache would, and counts images the same way:
    # a decision of its entry.
    assert OFFLINE.image_tokens is anthropic_image_tokens


def test_each_calling_entry_maps_its_sdks_errors() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1:9")
    anthropic_error = ANTHROPIC.map_error(anthropic.APITimeoutError(request=request), "")
    openai_error = OPENAI.map_error(openai.APIConnectionError(request=request), "partial")
    assert isinstance(anthropic_error, ProviderTimedOut)
    assert isinstance(openai_error, StreamInterrupted) and openai_error.partial_text == "partial"
    assert not OFFLINE.maps_errors  # it never fails
    with pytest.raises(TypeError):
        OFFLINE.map_error(RuntimeError("x"))


def test_the_choices_of_a_profile_are_the_registry() -> None:
    assert provider_choices() == [(k.name, k.label) for k in PROVIDERS.values()]
    assert PROVIDER_NAMES == ("anthropic", "openai", "offline")
