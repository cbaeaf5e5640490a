"""The Models API through the real SDK against the fake server: every page, every lifecycle
stage, one model by id, and the capabilities object kept as it came."""

from __future__ import annotations

import anthropic
import pytest

from chatplatform.core.llm import anthropic_models
from chatplatform.core.llm.anthropic_models import AnthropicModels
from chatplatform.core.llm.capabilities import COMPACTION, supports_context_strategy
from tests.fakes.anthropic_models_fake import model_payload


@pytest.fixture
def models(fake_anthropic):
    client = AnthropicModels(api_key="sk-test", base_url=fake_anthropic.url, timeout=5)
    yield client
    client.close()


def test_the_list_reads_every_page_and_every_lifecycle(models, fake_anthropic, monkeypatch):
    monkeypatch.setattr(anthropic_models, "PAGE_SIZE", 2)
    fake_anthropic.models = [
        model_payload("claude-sonnet-5-5", "Claude Sonnet 5.5"),
        model_payload("claude-opus-5", "Claude Opus 5", lifecycle="deprecated"),
        model_payload("claude-opus-4-1", "Claude Opus 4.1", lifecycle="retired"),
        model_payload("claude-haiku-5-5", "Claude Haiku 5.5", window=1_000_000),
    ]
    listed = models.list()
    assert [m.id for m in listed] == [
        "claude-sonnet-5-5",
        "claude-opus-5",
        "claude-opus-4-1",
        "claude-haiku-5-5",
    ]
    assert len(fake_anthropic.requests_to("/v1/models")) == 2  # two pages
    retired = listed[2]
    assert retired.retired and retired.lifecycle == "retired"
    haiku = listed[3]
    assert (haiku.context_window, haiku.max_output_tokens) == (1_000_000, 128_000)
    assert haiku.supports_vision
    assert supports_context_strategy(haiku.capabilities, COMPACTION)
    assert haiku.capabilities["thinking"]["types"]["enabled"] == {"supported": False}


def test_one_model_by_id_and_a_missing_one(models, fake_anthropic):
    fake_anthropic.models = [
        model_payload("claude-haiku-4-5-20251001", "Claude Haiku 4.5", image_input=False)
    ]
    haiku = models.retrieve("claude-haiku-4-5-20251001")
    assert haiku.display_name == "Claude Haiku 4.5" and not haiku.supports_vision
    with pytest.raises(anthropic.NotFoundError):
        models.retrieve("claude-unknown")
