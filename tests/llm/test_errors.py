"""The provider-neutral error classifier, and the SDKs' timeouts and connection failures."""

from __future__ import annotations

import anthropic
import httpx2
import openai
import pytest

from chatplatform.core.llm.errors import (
    Overloaded,
    PromptTooLong,
    ProviderTimedOut,
    ProviderUnavailable,
    ProviderUnreachable,
    RateLimited,
    SpendCapReached,
    StreamInterrupted,
    classify_error,
    parse_prompt_too_long,
    parse_retry_after,
)
from chatplatform.core.llm.providers import ANTHROPIC, OPENAI


def test_parse_prompt_too_long_in_both_dialects() -> None:
    assert parse_prompt_too_long("prompt is too long: 210632 tokens > 200000 maximum") == (
        210632,
        200000,
    )
    assert parse_prompt_too_long(
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"
    ) == (5000, 4096)
    assert parse_prompt_too_long("prompt is too long") == (None, None)


def test_unparseable_prompt_too_long_still_classifies() -> None:
    error = classify_error(
        status=400, error_type="invalid_request_error", message="prompt is too long"
    )
    assert isinstance(error, PromptTooLong)
    assert error.prompt_tokens is None


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_rate_limit_with_and_without_retry_after() -> None:
    limited = classify_error(status=429, error_type=None, message="x", headers={"retry-after": "4"})
    capped = classify_error(status=429, error_type=None, message="x", headers={})
    spend = classify_error(
        status=429,
        error_type="rate_limit_error",
        message="x",
        headers={"retry-after": "4"},
        error_code="enforced_spend_limit_reached",
    )

    assert isinstance(limited, RateLimited) and limited.retry_after == 4 and limited.retryable
    assert isinstance(capped, SpendCapReached) and not capped.retryable
    assert isinstance(spend, SpendCapReached)


def test_stream_errors_without_status_use_the_error_type() -> None:
    assert isinstance(
        classify_error(status=None, error_type="overloaded_error", message=""), Overloaded
    )
    assert isinstance(
        classify_error(status=None, error_type="something_new", message=""), ProviderUnavailable
    )


def test_partial_text_always_means_interrupted() -> None:
    error = classify_error(
        status=None, error_type="overloaded_error", message="Overloaded", partial_text="Hel"
    )

    assert isinstance(error, StreamInterrupted)
    assert (error.cause, error.partial_text, error.retryable) == ("overloaded", "Hel", False)


def test_a_5xx_answer_is_a_provider_that_was_reached_and_failed() -> None:
    error = classify_error(status=500, error_type="api_error", message="Internal server error")

    assert type(error) is ProviderUnavailable
    assert (error.code, error.status_code, error.retryable) == ("provider_unavailable", 500, True)


def test_timeouts_are_timeouts_whether_told_by_status_or_by_the_stream() -> None:
    by_status = classify_error(status=408, error_type=None, message="Request Timeout")
    in_stream = classify_error(status=None, error_type="timeout_error", message="timed out")

    for error in (by_status, in_stream):
        assert isinstance(error, ProviderTimedOut) and isinstance(error, ProviderUnavailable)
        assert error.code == "timeout" and error.retryable


REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")


@pytest.mark.parametrize(
    ("sdk_error", "expected", "code"),
    [
        (anthropic.APITimeoutError(request=REQUEST), ProviderTimedOut, "timeout"),
        (anthropic.APIConnectionError(request=REQUEST), ProviderUnreachable, "connection_error"),
        (openai.APITimeoutError(request=REQUEST), ProviderTimedOut, "timeout"),
        (openai.APIConnectionError(request=REQUEST), ProviderUnreachable, "connection_error"),
    ],
)
def test_sdk_timeouts_and_connection_failures_keep_their_codes(
    sdk_error: Exception, expected: type[Exception], code: str
) -> None:
    if isinstance(sdk_error, anthropic.APIError):
        mapped = ANTHROPIC.map_error(sdk_error)
    else:
        assert isinstance(sdk_error, openai.APIError)
        mapped = OPENAI.map_error(sdk_error)

    assert type(mapped) is expected
    assert mapped.code == code and mapped.retryable and mapped.status_code is None
