"""Fixtures of the SDK-compatible API's tests: the live server (``tests/api/live_server.py``)
with the model behind the offline provider, and an API key per tenant."""

from __future__ import annotations

import pytest

from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.services import api_key_create
from chats.replies import runner


@pytest.fixture
def live_url(live_url: str) -> str:
    """The live server, its replies from the offline provider a word every 2 ms (so that a
    streamed reply arrives in several events)."""
    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=0.002))
    return live_url


@pytest.fixture
def key_a(tenant_a, member_a) -> str:
    return api_key_create(tenant=tenant_a, name="sdk", user=member_a)[1]


@pytest.fixture
def key_b(tenant_b, member_b) -> str:
    return api_key_create(tenant=tenant_b, name="sdk", user=member_b)[1]
