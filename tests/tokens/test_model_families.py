"""The prior ratio of a model family's token counts to the estimator's (before calibration)."""

from __future__ import annotations

import pytest

from chatplatform.core.llm.providers import provider_kind
from chatplatform.core.tokens.model_families import (
    NEWER_CLAUDE_TOKENIZER_RATIO,
    claude_version,
)


@pytest.mark.parametrize(
    ("model", "ratio"),
    [
        ("claude-haiku-4-5-20251001", 1.0),
        ("claude-sonnet-4-6", 1.0),
        ("claude-opus-4-1", 1.0),
        ("claude-3-5-sonnet-20241022", 1.0),
        ("claude-opus-4-7", NEWER_CLAUDE_TOKENIZER_RATIO),
        ("claude-sonnet-5", NEWER_CLAUDE_TOKENIZER_RATIO),
        ("claude-haiku-5-5", NEWER_CLAUDE_TOKENIZER_RATIO),
        ("claude-fable-5-2", NEWER_CLAUDE_TOKENIZER_RATIO),
        ("claude-mythos-preview", NEWER_CLAUDE_TOKENIZER_RATIO),
        ("claude-test", 1.0),
    ],
)
def test_claude_models_since_4_7_count_about_30_percent_more(model, ratio):
    assert provider_kind("anthropic").prior_ratio(model) == ratio


def test_other_providers_and_versions():
    assert provider_kind("openai").prior_ratio("claude-opus-5") == 1.0
    assert claude_version("claude-sonnet-4-20250514") == (4, 0)
    assert claude_version("claude-opus-5-5") == (5, 5)
    assert claude_version("claude-mythos-preview") is None
