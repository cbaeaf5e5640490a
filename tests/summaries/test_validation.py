"""Validation of a model's structured summary."""

from __future__ import annotations

import json

import pytest

from chatplatform.core.tokens import get_counter
from summaries.summarizer import StructuredSummary, SummaryInvalid, check_size, parse_structured

GOOD = {"summary": "Ada planned a trip.", "facts": ["Flight on March 14"], "open_questions": []}


def test_valid_json_is_parsed():
    parsed = parse_structured(json.dumps(GOOD))
    assert parsed == StructuredSummary("Ada planned a trip.", ("Flight on March 14",), ())


def test_code_fences_and_camel_case_are_tolerated():
    raw = "```json\n" + json.dumps({"summary": "S", "openQuestions": ["Q?"]}) + "\n```"
    assert parse_structured(raw).open_questions == ("Q?",)


@pytest.mark.parametrize(
    ("raw", "stop", "code"),
    [
        ("", "end_turn", "empty"),
        ("   ", "end_turn", "empty"),
        ('{"summary": "x", "facts": [', "end_turn", "unparseable"),
        ("The conversation was about Lisbon.", "end_turn", "unparseable"),
        ("I'm sorry, but I can't help with summarising this conversation.", "end_turn", "refusal"),
        (json.dumps({"summary": "I cannot summarise this content."}), "end_turn", "refusal"),
        ("Error: upstream model timed out", "end_turn", "error_text"),
        (json.dumps({"summary": "Internal server error"}), "end_turn", "error_text"),
        (json.dumps({"summary": ""}), "end_turn", "empty"),
        (json.dumps({"summary": "ok", "facts": "not a list"}), "end_turn", "schema"),
        (json.dumps({"summary": "ok", "facts": [1, 2]}), "end_turn", "schema"),
        (json.dumps(["summary"]), "end_turn", "unparseable"),
        ("null", "end_turn", "error_text"),
        (json.dumps(GOOD), "refusal", "refusal"),
        (json.dumps(GOOD)[:-5], "max_tokens", "truncated"),
    ],
)
def test_invalid_outputs_are_rejected(raw, stop, code):
    with pytest.raises(SummaryInvalid) as info:
        parse_structured(raw, stop_reason=stop)
    assert info.value.code == code


def test_oversized_summary_is_rejected():
    counter = get_counter("o200k_base")
    big = StructuredSummary(summary="word " * 500)
    with pytest.raises(SummaryInvalid) as info:
        check_size(big, counter, 100)
    assert info.value.code == "oversized"
    text, tokens = check_size(StructuredSummary("short"), counter, 100)
    assert text == "short" and tokens == counter.count("short")
