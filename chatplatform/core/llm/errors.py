"""Provider errors, independent of any SDK, and the HTTP-status classifier both providers use.

Every provider raises only :class:`ProviderError` subclasses from ``stream()``. ``retryable``
says whether the *request* may be sent again; the retry policy additionally refuses to retry
once any event reached the caller (see :mod:`chatplatform.core.llm.retry`).
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any


class ProviderError(Exception):
    """Base of every provider failure.

    ``code`` is a short stable identifier (``"overloaded"``, ``"prompt_too_long"``...);
    ``partial_text`` is the reply text already streamed to the caller before the failure
    (empty when nothing was streamed); ``status_code`` is the HTTP status when there was one.
    """

    code: str = "provider_error"
    default_retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        retryable: bool | None = None,
        partial_text: str = "",
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or type(self).code
        self.retryable = self.default_retryable if retryable is None else retryable
        self.partial_text = partial_text
        self.status_code = status_code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class RateLimited(ProviderError):
    """429 with a retry-after: the provider asks us to come back after ``retry_after`` seconds."""

    code = "rate_limited"
    default_retryable = True

    def __init__(self, message: str, *, retry_after: float, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class SpendCapReached(ProviderError):
    """429 without retry-after (or an explicit spend-limit code): waiting will not help."""

    code = "spend_cap_reached"


class Overloaded(ProviderError):
    """529 / ``overloaded_error``: the provider is temporarily out of capacity."""

    code = "overloaded"
    default_retryable = True


class PromptTooLong(ProviderError):
    """The prompt exceeds the model's context window; token numbers are set when reported."""

    code = "prompt_too_long"

    def __init__(
        self,
        message: str,
        *,
        prompt_tokens: int | None = None,
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens


class RequestTooLarge(ProviderError):
    """413: the request body is larger than the provider accepts (bytes, not tokens)."""

    code = "request_too_large"


class ProviderUnavailable(ProviderError):
    """The provider failed to answer, for a reason that may pass: a 5xx answer (its
    ``status_code`` is set), an ``api_error`` event in a stream, a stream that ended before
    its closing event. The provider *was* reached; the subclasses are the cases where it was
    not (:class:`ProviderUnreachable`, :class:`ProviderTimedOut`)."""

    code = "provider_unavailable"
    default_retryable = True


class ProviderUnreachable(ProviderUnavailable):
    """No connection to the provider could be made or kept (refused, DNS, reset, TLS)."""

    code = "connection_error"


class ProviderTimedOut(ProviderUnavailable):
    """The provider did not answer within the request's timeout."""

    code = "timeout"


class AuthenticationFailed(ProviderError):
    """401/403: the key is missing, wrong or lacks permission. Not retried."""

    code = "authentication_failed"


class InvalidRequest(ProviderError):
    """Any other 4xx: the request itself is wrong and sending it again cannot help."""

    code = "invalid_request"


class StreamInterrupted(ProviderError):
    """The stream failed after some text was delivered: the reply is incomplete.

    ``partial_text`` holds what was streamed; ``cause`` is the code of the underlying error.
    Never retried: the caller already showed the partial text.
    """

    code = "stream_interrupted"

    def __init__(self, message: str, *, cause: str = "", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.cause = cause


class StreamStalled(ProviderError):
    """No stream event arrived for ``idle_seconds``. Retryable only if nothing was streamed."""

    code = "stream_stalled"
    default_retryable = True

    def __init__(self, message: str, *, idle_seconds: float, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.idle_seconds = idle_seconds


_ANTHROPIC_TOO_LONG = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)", re.I)
# OpenAI / vLLM: "maximum context length is 8192 tokens. However, you requested 9000 tokens"
_OPENAI_TOO_LONG = re.compile(
    r"maximum context length is (\d+) tokens.*?(?:requested|resulted in) (\d+) tokens", re.I | re.S
)
_TOO_LONG_MARKERS = ("prompt is too long", "context length", "context_length_exceeded")


def parse_prompt_too_long(message: str) -> tuple[int | None, int | None]:
    """Return ``(prompt_tokens, max_tokens)`` from a provider's message, ``None`` if absent."""
    if match := _ANTHROPIC_TOO_LONG.search(message):
        return int(match.group(1)), int(match.group(2))
    if match := _OPENAI_TOO_LONG.search(message):
        return int(match.group(2)), int(match.group(1))
    return None, None


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def classify_error(
    *,
    status: int | None,
    error_type: str | None,
    message: str,
    headers: Mapping[str, str] | None = None,
    error_code: str | None = None,
    partial_text: str = "",
) -> ProviderError:
    """Map an HTTP failure (status and/or the body's error type) to a :class:`ProviderError`.

    ``status`` may be ``None`` (or 200) for an error event inside a stream; the body's
    ``error_type`` then decides. Once ``partial_text`` is non-empty the result is always
    :class:`StreamInterrupted`, whatever the cause.
    """
    error = _classify(status, (error_type or "").lower(), message, headers, error_code or "")
    if partial_text:
        return StreamInterrupted(
            f"reply interrupted: {error.message}",
            cause=error.code,
            partial_text=partial_text,
            status_code=error.status_code,
        )
    return error


def _classify(
    status: int | None,
    error_type: str,
    message: str,
    headers: Mapping[str, str] | None,
    error_code: str,
) -> ProviderError:
    lowered = message.lower()
    if status == 429 or error_type in ("rate_limit_error", "rate_limit_exceeded"):
        retry_after = parse_retry_after(headers)
        if retry_after is None or "spend_limit" in error_code or "quota" in error_type:
            return SpendCapReached(message, status_code=status)
        return RateLimited(message, retry_after=retry_after, status_code=status)
    if status == 529 or error_type == "overloaded_error":
        return Overloaded(message, status_code=status)
    if status == 413 or error_type == "request_too_large":
        return RequestTooLarge(message, status_code=status)
    if status in (401, 403) or error_type in ("authentication_error", "permission_error"):
        return AuthenticationFailed(message, status_code=status)
    if any(marker in lowered or marker in error_code for marker in _TOO_LONG_MARKERS):
        prompt_tokens, max_tokens = parse_prompt_too_long(message)
        return PromptTooLong(
            message, prompt_tokens=prompt_tokens, max_tokens=max_tokens, status_code=status
        )
    if status == 408:
        return ProviderTimedOut(message, status_code=status)
    if status is not None and status >= 500:
        return ProviderUnavailable(message, status_code=status)
    if error_type == "timeout_error":
        return ProviderTimedOut(message, status_code=status)
    if error_type in ("api_error", "server_error"):
        return ProviderUnavailable(message, status_code=status)
    if status is not None and 400 <= status < 500:
        return InvalidRequest(message, status_code=status)
    # An error we cannot place (e.g. an unknown error event in a stream): assume transient.
    return ProviderUnavailable(message, status_code=status)
