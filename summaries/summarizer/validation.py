"""Validation of a model's summary before it is used. Pure.

A model's output is accepted only if it is a JSON object with a non-empty ``summary`` string,
``facts``, ``open_questions`` and (optional) ``instructions`` lists of strings, is not a
refusal or an error text, was not cut off, and its rendered text fits the summary's token
size.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chatplatform.core.tokens.base import TokenCounter

from .render import render_summary
from .types import StructuredSummary

MAX_FACTS = 50
MAX_QUESTIONS = 30
MAX_INSTRUCTIONS = 20
MAX_ITEM_CHARS = 2000

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*|\s*```\s*$")
REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|i can(?:no|')t|i cannot|i won'?t|"
    r"i will not|i'?m (?:not able|unable)|i am (?:not able|unable)|as an ai\b|"
    r"i must decline|unfortunately,? i can)",
    re.IGNORECASE,
)
ERROR_TEXT = re.compile(
    r"^\W*(?:error\b|\[offline provider\]|internal server error|an error (?:has )?occurred|"
    r"rate limit|overloaded|service unavailable|traceback \(most recent call last\)|"
    r"exception\b|bad gateway|request failed|null\b|none\b|undefined\b|n/?a\W*$)",
    re.IGNORECASE,
)


class SummaryInvalid(ValueError):
    """The output cannot be used; ``code`` says why (shown to the model on the retry)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _json_object(raw: str) -> Any:
    text = _FENCE.sub("", raw.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise SummaryInvalid("unparseable", "the answer is not a JSON object")
    try:
        return json.loads(text[start : end + 1])
    except ValueError as exc:
        raise SummaryInvalid("unparseable", f"the answer is not valid JSON ({exc})") from None


def _strings(value: Any, name: str, limit: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SummaryInvalid("schema", f"`{name}` must be a list of strings")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise SummaryInvalid("schema", f"`{name}` must contain only strings")
        item = " ".join(item.split())
        if item:
            out.append(item[:MAX_ITEM_CHARS])
    return tuple(out[:limit])


def parse_structured(raw: str, *, stop_reason: str | None = None) -> StructuredSummary:
    """The structured summary in a model's answer, or SummaryInvalid."""
    if stop_reason == "refusal":
        raise SummaryInvalid("refusal", "the model refused to summarise")
    if stop_reason == "max_tokens":
        raise SummaryInvalid("truncated", "the answer was cut off at the output limit")
    if not raw or not raw.strip():
        raise SummaryInvalid("empty", "the answer is empty")
    if "\x00" in raw:
        raise SummaryInvalid("invalid", "the answer contains NUL characters")
    if "{" not in raw:
        if REFUSAL.search(raw):
            raise SummaryInvalid("refusal", "the model refused to summarise")
        if ERROR_TEXT.search(raw):
            raise SummaryInvalid("error_text", "the answer is an error message")
    data = _json_object(raw)
    if not isinstance(data, dict):
        raise SummaryInvalid("schema", "the answer must be a JSON object")
    summary = data.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise SummaryInvalid("empty", "`summary` must be a non-empty string")
    summary = summary.strip()
    if REFUSAL.search(summary):
        raise SummaryInvalid("refusal", "the summary is a refusal")
    if ERROR_TEXT.search(summary):
        raise SummaryInvalid("error_text", "the summary is an error message")
    questions = data.get("open_questions", data.get("openQuestions"))
    return StructuredSummary(
        summary=summary,
        facts=_strings(data.get("facts"), "facts", MAX_FACTS),
        open_questions=_strings(questions, "open_questions", MAX_QUESTIONS),
        instructions=_strings(data.get("instructions"), "instructions", MAX_INSTRUCTIONS),
    )


def check_size(
    content: StructuredSummary, counter: TokenCounter, max_tokens: int
) -> tuple[str, int]:
    """The rendered text and its tokens; SummaryInvalid("oversized") when over ``max_tokens``."""
    text = render_summary(content)
    tokens = counter.count(text)
    if tokens > max_tokens:
        raise SummaryInvalid(
            "oversized", f"the summary has {tokens} tokens; at most {max_tokens} are allowed"
        )
    return text, tokens
