"""pytest fixtures for the fake model servers.

Import them into a conftest: ``from tests.fakes.fixtures import fake_anthropic, fake_openai``
(plus the session-scoped ``fake_anthropic_server`` / ``fake_openai_server`` they rely on).
Each server starts once per session; the function-scoped fixtures reset it for every test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .anthropic_fake import FakeAnthropic
from .openai_fake import FakeOpenAI
from .openid_provider import FakeOpenIDProvider


@pytest.fixture(scope="session")
def fake_anthropic_server() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_anthropic(fake_anthropic_server: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """A running fake Anthropic API (``.url`` is the SDK's base_url), clean for this test."""
    fake_anthropic_server.reset()
    yield fake_anthropic_server
    fake_anthropic_server.reset()


@pytest.fixture(scope="session")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_openai(fake_openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """A running fake OpenAI-compatible server (SDK base_url: ``.url + "/v1"``), reset."""
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()


@pytest.fixture(scope="session")
def fake_openid_provider_server() -> Iterator[FakeOpenIDProvider]:
    server = FakeOpenIDProvider().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_openid_provider(
    fake_openid_provider_server: FakeOpenIDProvider,
) -> Iterator[FakeOpenIDProvider]:
    """A running fake OpenID Connect provider (``.issuer``), with no faults, for this test."""
    fake_openid_provider_server.reset()
    yield fake_openid_provider_server
    fake_openid_provider_server.reset()
